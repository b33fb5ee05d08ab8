import QoSMapCLI
import QoSMapVersion

QoSMapCommand.version = QoSMapVersion.current
QoSMapCommand.run()
