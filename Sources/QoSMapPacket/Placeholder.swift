// Placeholder until this layer lands.
import QoSMapCore
