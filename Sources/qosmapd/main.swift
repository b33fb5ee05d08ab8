print("qosmapd: not implemented yet")
