"""The GPT example served: REST and a WebSocket token stream (FastAPI + uvicorn, Debian's python3-fastapi and
python3-uvicorn), as a replica of a gpugeek service (docs/service-spec.md: the platform sets $PORT).

    /usr/bin/python3 serve.py --port 8000 [--model-dir DIR | --checkpoint DIR] [--version v1]

Routes:
  GET  /health       200 {"status": "ready", "version": V, "weights": W} once the model is loaded (the readiness
                     probe); W says which weights: $GPUGEEK_MODEL (OWNER/NAME@COMMIT) or the folder, and the
                     quantisation scheme ("default/gpt@3f9c... (int8)", or "(unquantised)"); "checkpoint DIR"; or
                     "seeded"
  POST /predict      {"prompt": str (bytes are tokens, at most 200), "max_tokens": int 1..256 (default 16)}
                     -> {"version": V, "completion": str, "tokens": N}, with the `Gpugeek-Tokens: N` header the
                     gateway counts (gpugeek_gateway_tokens_total)
  WS   /stream       receives {"prompt": str, "max_tokens": int}, sends {"token": str} per generated token, then
                     {"done": true, "tokens": N, "version": V}
  WS   /echo         sends back every message it receives (a pass-through check)

Generation is greedy over byte tokens (vocab 256, config.json), on the CPU, under torch.no_grad(). The weights:
  --model-dir DIR   a model folder, model.safetensors and its config.json: what train.py exports to --out/model/,
                    or the same quantised by `gpugeek quantize` (dequantised to float32 on load, safetensors_io);
                    in a service, the version's `weights:` checkout, $GPUGEEK_MODEL_DIR (docs/models.md)
  --checkpoint DIR  train.py's --out folder (its checkpoint.pt)
  neither           the seeded initial ones (seed 0): the service answers, its text is noise
"""

import argparse
import json
import os
import sys

import torch
import uvicorn
from fastapi import FastAPI, HTTPException, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checkpoint  # noqa: E402
import safetensors_io as st  # noqa: E402
from model import build_model  # noqa: E402

MAX_PROMPT = 200
MAX_TOKENS = 256


def load_model(config, checkpoint_dir="", model_dir=""):
    """(model in eval mode, what its weights are): from model_dir (its config.json, else `config`), else from
    checkpoint_dir, else seeded."""
    if model_dir:
        path = os.path.join(model_dir, "model.safetensors")
        if not os.path.exists(path):
            raise SystemExit(f"serve.py: no model.safetensors in {model_dir}")
        tensors, metadata = st.load_file(path)
        folder_config = os.path.join(model_dir, "config.json")
        model = build_model(folder_config if os.path.exists(folder_config) else config, seed=0)
        model.load_state_dict(st.dequantize(tensors, metadata))
        quantised = json.loads(metadata.get(st.QUANT_KEY, '{"tensors": {}}'))["tensors"]
        schemes = sorted({t["scheme"] for t in quantised.values()}) or ["unquantised"]
        what = f"{os.environ.get('GPUGEEK_MODEL') or model_dir} ({', '.join(schemes)})"
    else:
        model = build_model(config, seed=0)
        what = "seeded"
        if checkpoint_dir:
            state = checkpoint.load(checkpoint_dir)
            if state is None:
                raise SystemExit(f"serve.py: no checkpoint in {checkpoint_dir}")
            model.load_state_dict(state["model"])
            what = f"checkpoint {checkpoint_dir}"
    model.eval()
    return model, what


def generate(model, prompt, max_tokens):
    """Greedy continuation of `prompt` (bytes): yields one byte token at a time."""
    n_positions = model.cfg.n_positions
    ids = list(prompt.encode("utf-8", "replace")[:MAX_PROMPT]) or [0]
    with torch.no_grad():
        for _ in range(max_tokens):
            window = torch.tensor([ids[-n_positions:]], dtype=torch.long)
            logits, _ = model(window)
            token = int(torch.argmax(logits[0, -1]).item())
            ids.append(token)
            yield token


def text_of(token):
    return bytes([token]).decode("latin-1")


def parse_request(body):
    if not isinstance(body, dict):
        raise ValueError("the request must be a JSON object")
    prompt = body.get("prompt", "")
    max_tokens = body.get("max_tokens", 16)
    if not isinstance(prompt, str):
        raise ValueError("prompt: must be a string")
    if not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_TOKENS:
        raise ValueError(f"max_tokens: must be an integer 1..{MAX_TOKENS}")
    return prompt, max_tokens


def make_app(model, version, weights="seeded"):
    app = FastAPI()

    @app.get("/health")
    def health():
        return {"status": "ready", "version": version, "weights": weights}

    @app.post("/predict")
    def predict(body: dict):
        try:
            prompt, max_tokens = parse_request(body)
        except ValueError as e:
            raise HTTPException(status_code=400, detail=str(e))
        tokens = list(generate(model, prompt, max_tokens))
        return JSONResponse({"version": version, "completion": "".join(map(text_of, tokens)),
                             "tokens": len(tokens)}, headers={"Gpugeek-Tokens": str(len(tokens))})

    @app.websocket("/stream")
    async def stream(ws: WebSocket):
        await ws.accept()
        try:
            while True:
                try:
                    prompt, max_tokens = parse_request(json.loads(await ws.receive_text()))
                except ValueError as e:
                    await ws.send_text(json.dumps({"error": str(e)}))
                    continue
                n = 0
                for token in generate(model, prompt, max_tokens):
                    await ws.send_text(json.dumps({"token": text_of(token)}))
                    n += 1
                await ws.send_text(json.dumps({"done": True, "tokens": n, "version": version}))
        except WebSocketDisconnect:
            return

    @app.websocket("/echo")
    async def echo(ws: WebSocket):
        await ws.accept()
        try:
            while True:
                await ws.send_text(await ws.receive_text())
        except WebSocketDisconnect:
            return

    return app


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    p.add_argument("--host", default="127.0.0.1")
    weights = p.add_mutually_exclusive_group()
    weights.add_argument("--model-dir", default="",
                         help="model folder: model.safetensors (float32 or gpugeek-quantised) and config.json, "
                              "e.g. $GPUGEEK_MODEL_DIR")
    weights.add_argument("--checkpoint", default="", help="run folder of train.py (its checkpoint file)")
    p.add_argument("--config", default=os.path.join(HERE, "config.json"))
    p.add_argument("--version", default=os.environ.get("GPUGEEK_SERVICE_VERSION", "v1"))
    args = p.parse_args()
    torch.set_num_threads(1)
    model, weights = load_model(args.config, args.checkpoint, args.model_dir)
    print(f"serve.py: version {args.version}, weights {weights}, port {args.port}", flush=True)
    uvicorn.run(make_app(model, args.version, weights), host=args.host, port=args.port, log_level="warning",
                ws="websockets", timeout_keep_alive=75)


if __name__ == "__main__":
    main()
