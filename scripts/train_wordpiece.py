#!/usr/bin/env python3
"""train_wordpiece.py — a BERT WordPiece tokenizer.json trained with Hugging Face `tokenizers` (the reference venv,
scripts/setup-venv.sh), for the masked-LM demo (scripts/demo_mlm.sh): BERT's normaliser (lowercase, strip
accents) and pre-tokenizer, WordPiece with "##" continuations, the special tokens [PAD] 0, [UNK] 1, [CLS] 2,
[SEP] 3, [MASK] 4 and BertProcessing's [CLS] $A [SEP] — what bert-base-uncased's tokenizer.json has, at another size.

  train_wordpiece.py OUT.json VOCAB_SIZE TEXT_FILE...
prints the vocabulary size."""
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[1])
    out, size, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train(files, trainers.WordPieceTrainer(vocab_size=size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    tok.save(out)
    print(tok.get_vocab_size())


if __name__ == "__main__":
    main()
