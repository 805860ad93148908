// The core includes this extmod header; the source used has no extmod/, and nothing of it is needed here.
