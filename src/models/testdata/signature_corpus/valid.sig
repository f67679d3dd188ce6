{
  "dsseEnvelope": {
    "payload": "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEiLCJwcmVkaWNhdGUiOnsicmVzb3VyY2VzIjpbeyJhbGdvcml0aG0iOiJzaGEyNTYiLCJkaWdlc3QiOiIyY2YyNGRiYTVmYjBhMzBlMjZlODNiMmFjNWI5ZTI5ZTFiMTYxZTVjMWZhNzQyNWU3MzA0MzM2MjkzOGI5ODI0IiwibmFtZSI6ImNvbmZpZy5qc29uIn0seyJhbGdvcml0aG0iOiJzaGEyNTYiLCJkaWdlc3QiOiI0ODZlYTQ2MjI0ZDFiYjRmYjY4MGYzNGY3YzlhZDk2YThmMjRlYzg4YmU3M2VhOGU1YTZjNjUyNjBlOWNiOGE3IiwibmFtZSI6IndlaWdodHMvbW9kZWwuc2FmZXRlbnNvcnMifV0sInNlcmlhbGl6YXRpb24iOnsiYWxsb3dfc3ltbGlua3MiOmZhbHNlLCJoYXNoX3R5cGUiOiJzaGEyNTYiLCJpZ25vcmVfcGF0aHMiOlsiLmdpdCIsIi5naXRhdHRyaWJ1dGVzIiwiLmdpdGh1YiIsIi5naXRpZ25vcmUiLCJtb2RlbC5zaWciXSwibWV0aG9kIjoiZmlsZXMifX0sInByZWRpY2F0ZVR5cGUiOiJodHRwczovL21vZGVsX3NpZ25pbmcvc2lnbmF0dXJlL3YxLjAiLCJzdWJqZWN0IjpbeyJkaWdlc3QiOnsic2hhMjU2IjoiNzMwNWRiOWIyYWJjY2Q3MDZjMjU2ZGIzZDk3ZTVmZjQ4ZDY3N2NmZTRkM2E1OTA0YWZiN2RhMGUzOTUwZTFlMiJ9LCJuYW1lIjoidGlueS1tb2RlbCJ9XX0=",
    "payloadType": "application/vnd.in-toto+json",
    "signatures": [
      {
        "keyid": "",
        "sig": "BOj4R+3KriQfQfHIQl0p7qLcrVbc3Vn0s2WArV6wxLXWy3b2MfePJmFkf5aS2myFhk5/Tc+8zeGBKaN3vU5GDA=="
      }
    ]
  },
  "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
  "verificationMaterial": {
    "publicKey": {
      "hint": "6c0ede04a43e2ad41754da5551ce3218ec2c81834c00ebb9f538550423fae1b7"
    },
    "tlogEntries": []
  }
}
