// The core includes this extmod header; this port has no VFS layer (its filesystem is filesystem.c).
