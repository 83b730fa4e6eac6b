#!/usr/bin/env python3
"""Reference outputs from llama.cpp (via llama-cpp-python) for Plinth's exactness tests.

For each model and each of 30 prompts (15 chat, 15 raw): the prompt token ids as llama.cpp
tokenizes them, 64 greedily generated tokens, the top-2 logits at every step (to judge near
ties), and the full logits at the last prompt position (of every case, or every k-th where the vocabulary is
large: `logit_cases`; stored as int16 scaled to the logit
range, so the quantization error is at most range/131070).

It also records how well llama.cpp agrees with itself: the same prompt prefilled token by token
instead of in one batch (llama.cpp's other code path) gives slightly different logits, and with
int8-quantized activations small models amplify such differences. `llama_self` holds that
path's last-position logit error (relative to the logit range) and its greedy continuation, the
baseline against which any other engine's agreement can be judged.

Dev-time only: `pip install llama-cpp-python` builds llama.cpp from source.
Usage: python3 Scripts/make_generation_fixtures.py [smollm2|qwen25|gemma3 ...]
"""
import json, os, struct, sys
import numpy as np
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
import llama_cpp
from gguf import GGUFReader

HOME = os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth"))
MODELS = {
    "smollm2": f"{HOME}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen25": f"{HOME}/models/Qwen2.5-Coder-0.5B-Instruct/Qwen2.5-Coder-0.5B-Instruct.gguf",
    "gemma3": f"{HOME}/models/Gemma-3-270M/gemma-3-270m-q4_k_m.gguf",
}
# A file without a chat template gets Plinth's built-in one for its architecture.
BUILTIN_TEMPLATES = {"gemma3": os.path.join(os.path.dirname(__file__), "..", "Models", "templates", "gemma3.jinja")}
# Keep the last-position logits of every k-th case only, where a vocabulary makes them large
# (Gemma: 262,144 logits, 512 KB a case; five cases keep the file small).
LOGITS_EVERY = {"gemma3": 6}
OUT = os.path.join(os.path.dirname(__file__), "..", "Tests", "PlinthRuntimeTests", "Fixtures", "generation")
N_GEN = 64

CHAT = [
    [("user", "What is the capital of France?")],
    [("user", "Write a haiku about the sea.")],
    [("system", "You are a terse assistant."), ("user", "Explain recursion in one sentence.")],
    [("user", "List three prime numbers greater than 50.")],
    [("user", "Translate 'good morning' into Spanish, French and German.")],
    [("user", "Write a Python function that reverses a string.")],
    [("system", "You answer in JSON."), ("user", "Give me a person with a name and an age.")],
    [("user", "Hi!"), ("assistant", "Hello! How can I help you today?"), ("user", "Tell me a joke.")],
    [("user", "What is 17 * 23?")],
    [("user", "Summarize the plot of Romeo and Juliet in two sentences.")],
    [("user", "Wie spät ist es in Tokio, wenn es in Berlin 12 Uhr ist?")],
    [("user", "写一首关于春天的短诗。")],
    [("system", "You are a pirate."), ("user", "Describe your ship.")],
    [("user", "Give me a SQL query that counts rows in a table named users.")],
    [("user", "What are the three states of matter? 🌊🔥")],
]
RAW = [
    "The quick brown fox",
    "Once upon a time, in a land far away,",
    "def fibonacci(n):\n",
    "1, 2, 3, 4, 5,",
    "The capital of Japan is",
    "<html>\n<head>\n<title>",
    "Q: What is the boiling point of water?\nA:",
    "import numpy as np\nimport",
    "In 1969, Neil Armstrong",
    "The mitochondria is",
    "SELECT name, email FROM",
    "Dear Sir or Madam,\n\nI am writing to",
    "   indented text with    many spaces\tand tabs",
    "Les Misérables est un roman de",
    "{\"name\": \"Alice\", \"age\":",
]


def render_chat(template, messages, bos, eos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env.globals["raise_exception"] = raise_exception
    msgs = [{"role": r, "content": c} for r, c in messages]
    return env.from_string(template).render(messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos)


def last_logits(llm):
    # Only the last token of each eval asks for logits; llama.cpp keeps them as output row 0.
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32).copy()


def greedy(llm, logits, n):
    gen, top2 = [], []
    for _ in range(n):
        order = np.argsort(-logits, kind="stable")[:2]
        tok = int(np.argmax(logits))
        top2.append([int(order[0]), float(logits[order[0]]), int(order[1]), float(logits[order[1]])])
        gen.append(tok)
        if llm.token_is_eog(tok) if hasattr(llm, "token_is_eog") else tok == llm.token_eos():
            break
        llm.eval([tok])
        logits = last_logits(llm)
    return gen, top2


def main(names):
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        path = MODELS[name]
        reader = GGUFReader(path)
        if "tokenizer.chat_template" in reader.fields:
            template = reader.fields["tokenizer.chat_template"].contents()
        else:
            arch = reader.fields["general.architecture"].contents()
            template = open(BUILTIN_TEMPLATES[arch]).read()
        every = LOGITS_EVERY.get(name, 1)
        llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=2, verbose=False, seed=0)
        vocab = llm.n_vocab()
        bos = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "replace") if llm.token_bos() >= 0 else ""
        eos = llm.detokenize([llm.token_eos()], special=True).decode("utf-8", "replace")
        cases = []
        logit_blobs = []
        prompts = [("chat", m) for m in CHAT] + [("raw", p) for p in RAW]
        for kind, p in prompts:
            if kind == "chat":
                text = render_chat(template, p, bos, eos)
                # A template that writes the BOS token itself (Gemma's) gets no second one.
                ids = llm.tokenize(text.encode("utf-8"), add_bos=not (bos and text.startswith(bos)), special=True)
            else:
                text = p
                ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            llm.reset()
            llm.eval(ids)
            last = last_logits(llm)
            lo, hi = float(last.min()), float(last.max())
            q = np.round((last - lo) / (hi - lo) * 65535.0 - 32768.0).clip(-32768, 32767).astype("<i2")
            if len(cases) % every == 0:
                logit_blobs.append(q.tobytes())
            gen, top2 = greedy(llm, last, N_GEN)
            llm.reset()
            for t in ids:
                llm.eval([t])
            alt = last_logits(llm)
            alt_gen, _ = greedy(llm, alt, N_GEN)
            self_error = float(np.abs(alt - last).max() / (hi - lo))
            cases.append({
                "kind": kind,
                "messages": [[r, c] for r, c in p] if kind == "chat" else None,
                "text": text,
                "prompt_ids": ids,
                "generated": gen,
                "top2": top2,
                "last_logits": {"min": lo, "max": hi, "argmax": int(np.argmax(last))},
                "llama_self": {"logit_error": self_error, "generated": alt_gen},
            })
        per = 10
        for i in range(0, len(logit_blobs), per):
            with open(os.path.join(OUT, f"{name}_logits_{i // per}.bin"), "wb") as f:
                f.write(struct.pack("<II", vocab, len(logit_blobs[i:i + per])))
                for b in logit_blobs[i:i + per]:
                    f.write(b)
        meta = {
            "model": os.path.basename(path),
            "llama_cpp_python": llama_cpp.__version__,
            "n_vocab": vocab,
            "generated_tokens": N_GEN,
            "logit_files_per_chunk": per,
            "logit_cases": [i for i in range(len(cases)) if i % every == 0],
            "cases": cases,
        }
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump(meta, f, ensure_ascii=False, indent=1)
        print(name, len(cases), "cases")


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODELS))
