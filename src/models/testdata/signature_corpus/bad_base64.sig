{
  "dsseEnvelope": {
    "payload": "not*base64!",
    "payloadType": "application/vnd.in-toto+json",
    "signatures": [
      {
        "keyid": "",
        "sig": "BOj4R+3KriQfQfHIQl0p7qLcrVbc3Vn0s2WArV6wxLXWy3b2MfePJmFkf5aS2myFhk5/Tc+8zeGBKaN3vU5GDA=="
      },
      {
        "sig": "AAAA"
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