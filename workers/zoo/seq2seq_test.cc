// Tests for seq2seq.cc (see README.md).
