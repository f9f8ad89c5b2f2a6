// Tests for audio.cc (see README.md).
