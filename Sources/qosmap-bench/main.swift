print("qosmap-bench: not implemented yet")
