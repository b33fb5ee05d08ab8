import QoSMapCLI

QoSMapCommand.run()
