// qstrs of the port that the qstr scanner cannot see
