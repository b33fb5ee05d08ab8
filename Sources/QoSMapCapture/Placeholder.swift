// Placeholder until this layer lands.
import CPcap
