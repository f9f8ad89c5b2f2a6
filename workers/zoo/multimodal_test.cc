// Tests for multimodal.cc (see README.md).
