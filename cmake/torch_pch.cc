// Translation unit that owns the shared torch precompiled header.
