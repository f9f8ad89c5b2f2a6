// Tests for vision_more.cc (see README.md).
