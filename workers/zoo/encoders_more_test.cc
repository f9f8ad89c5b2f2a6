// Tests for encoders_more.cc (see README.md).
