// Tests for decoders_more.cc (see README.md).
