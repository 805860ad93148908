"""The MicroPython agent's board image: which files go on the board, and how to run it in the unix VM."""
