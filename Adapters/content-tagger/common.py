"""What train.py, evaluate.py and check_tokenizer.py share: the prompt exactly as Plinth renders it,
the answer exactly as Plinth's constrained decoder writes it, the prompt variants and the metric.

Plinth's rendering (Sources/Plinth/Local/TranscriptRenderer.swift, LocalGeneration.swift,
Sources/plinth/Eval.swift), for `plinth eval --schema S --instructions-file I` on a record:

- system message: the instructions file's bytes as they are (no trimming);
- user message: "Respond with JSON that matches this schema: " + the schema file as compact JSON
  (members in file order, no whitespace) + "\\n\\n" + the record's `text`;
- SmolLM2's chat template from the GGUF, with the generation prompt; no BOS
  (tokenizer.ggml.add_bos_token is false), control tokens parsed;
- the answer: compact JSON (GrammarOptions whitespace .compact), properties in schema order
  (x-order), then the turn ends (<|im_end|>).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(os.environ.get("PLINTH_HOME", os.path.expanduser("~/.cache/plinth")), "models/SmolLM2-135M-Instruct")
# The plinth CLI built in this repository ($PLINTH overrides), and llama.cpp's sources
# ($LLAMA_CPP_SRC: a llama.cpp checkout or the llama-cpp-python sdist's vendor/llama.cpp).
PLINTH = os.environ.get("PLINTH", os.path.join(HERE, "..", "..", ".build", "release", "plinth"))
LLAMA_CPP_SRC = os.environ.get("LLAMA_CPP_SRC", os.path.join(HERE, "..", "..", "..", "llama.cpp"))
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SCHEMA_PREAMBLE = "Respond with JSON that matches this schema: "
FIELDS = ["topics", "emotions", "actions", "entities"]


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def load_main():
    with open(os.path.join(HERE, "schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(HERE, "instructions.txt"), encoding="utf-8") as f:
        instructions = f.read()
    return instructions, schema


def render_prompt(instructions, schema, text):
    """The prompt text of one record, ending with the assistant header (as Plinth renders it)."""
    system = instructions if instructions else DEFAULT_SYSTEM
    user = SCHEMA_PREAMBLE + compact(schema) + ("\n\n" + text if text else "")
    return (f"<|im_start|>system\n{system}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def schema_fields(schema):
    order = schema.get("x-order") or list(schema["properties"])
    return [(name, schema["properties"][name].get("maxItems", 99)) for name in order]


def render_answer(schema, labels):
    """The value Plinth's decoder writes for the gold labels: compact, in schema order."""
    return compact({name: labels[name][:n] for name, n in schema_fields(schema)})


# Training-only prompt variants, so the adapter follows the schema and instructions it is given
# rather than one fixed prompt. Each batch uses one variant (its prompts share a prefix).
def _array(n, description=None):
    d = {"type": "array", "items": {"type": "string"}, "maxItems": n}
    if description:
        d["description"] = description
    return d


def _object(props, title=None):
    names = [n for n, _ in props]
    o = {"type": "object"}
    if title:
        o["title"] = title
    o["properties"] = dict(props)
    o["required"] = names
    if title:
        o["x-order"] = names
    o["additionalProperties"] = False
    return o


def variants():
    instructions, schema = load_main()
    return [
        # (name, weight, instructions, schema)
        ("main", 0.5, instructions, schema),
        ("no-system", 0.1, None, schema),
        ("plain", 0.1, "Extract content tags from the text: topics, emotions, actions and named entities.",
         _object([(n, _array(m)) for n, m in schema_fields(schema)])),
        ("topics", 0.1, "Provide the most important topics of the text, in lowercase.",
         _object([("topics", _array(3, "The most important topics"))], title="Tags")),
        ("actions-emotions", 0.1, "Tag the text with its actions (base-form verbs) and the emotions it expresses.",
         _object([("actions", _array(2, "Most important actions in the input text")),
                  ("emotions", _array(3, "Emotions expressed in the input text"))], title="ContentTaggingResult")),
        ("entities-topics", 0.1, "List the named entities of the text, as written, and its topics.",
         _object([("entities", _array(5)), ("topics", _array(2))], title="EntityTags")),
    ]


def normalize(tag):
    """Case and whitespace folded, surrounding quotes and punctuation dropped."""
    return " ".join(str(tag).lower().split()).strip(" .,;:!?\"'")


def score(golds, preds, fields=FIELDS):
    """Exact-set F1 per field and micro-averaged over fields: per record and field, the gold and
    predicted lists become sets of normalized tags (empty strings dropped); TP = |G & P|,
    FP = |P - G|, FN = |G - P|, summed over records; F1 = 2TP / (2TP + FP + FN). A record with no
    parseable prediction counts as predicting nothing."""
    totals = {f: [0, 0, 0] for f in fields}
    exact = 0
    for g, p in zip(golds, preds):
        all_ok = True
        for f in fields:
            G = {normalize(x) for x in g.get(f, [])} - {""}
            P = {normalize(x) for x in (p or {}).get(f, []) if isinstance(x, (str, int, float))} - {""}
            t = totals[f]
            t[0] += len(G & P); t[1] += len(P - G); t[2] += len(G - P)
            all_ok &= G == P
        exact += all_ok

    def f1(tp, fp, fn):
        return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0

    out = {f: round(f1(*totals[f]), 4) for f in fields}
    tp, fp, fn = (sum(totals[f][i] for f in fields) for i in range(3))
    out["micro_f1"] = round(f1(tp, fp, fn), 4)
    out["exact_records"] = round(exact / max(1, len(golds)), 4)
    out["counts"] = {f: dict(zip(("tp", "fp", "fn"), totals[f])) for f in fields}
    return out
