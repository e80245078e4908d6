#!/usr/bin/env python3
"""make_mlm_corpus.py — a small learnable corpus and a BERT WordPiece tokenizer for the masked-LM tests
(tests/e2e/test_mlm.sh), made with Hugging Face `tokenizers` (run with the reference venv).

  make_mlm_corpus.py OUT_DIR [--docs N]
writes OUT_DIR/corpus.jsonl (N documents, {"text": ...}; default 600) and OUT_DIR/tokenizer.json: BERT's
normaliser (lowercase, strip accents), pre-tokenizer and WordPiece trained on the corpus with the special tokens
[PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4 and BertProcessing's [CLS] $A [SEP].
The documents are sentences of a small grammar (subjects, verbs, objects, places that agree with each other), so
a masked word is predictable from its context: a model that learns lifts the masked-token accuracy well above the
frequency of the commonest word."""
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SUBJ = {"the farmer": ("plants", "harvests", "sells"), "the baker": ("bakes", "sells", "slices"),
        "the sailor": ("rows", "steers", "repairs"), "the teacher": ("reads", "writes", "explains"),
        "the painter": ("paints", "sketches", "frames")}
OBJ = {"plants": "seeds", "harvests": "wheat", "sells": "bread", "bakes": "bread", "slices": "cake",
       "rows": "boats", "steers": "ships", "repairs": "nets", "reads": "books", "writes": "letters",
       "explains": "lessons", "paints": "portraits", "sketches": "landscapes", "frames": "pictures"}
PLACE = {"the farmer": "in the field", "the baker": "in the kitchen", "the sailor": "on the river",
         "the teacher": "in the school", "the painter": "in the studio"}
TIME = ["every morning", "at noon", "in the evening", "on sundays"]


def sentence(rng):
    s = rng.choice(sorted(SUBJ))
    v = rng.choice(SUBJ[s])
    return f"{s.capitalize()} {v} {OBJ[v]} {PLACE[s]} {rng.choice(TIME)}."


def main():
    out = sys.argv[1]
    n = int(sys.argv[sys.argv.index("--docs") + 1]) if "--docs" in sys.argv else 600
    rng = random.Random(1234)
    os.makedirs(out, exist_ok=True)
    docs = [" ".join(sentence(rng) for _ in range(rng.randint(2, 8))) for _ in range(n)]
    with open(os.path.join(out, "corpus.jsonl"), "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(docs, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    tok.save(os.path.join(out, "tokenizer.json"))
    print(tok.get_vocab_size())


if __name__ == "__main__":
    main()
