// Placeholder until this layer lands.
import CNetfilterQueue
import CMnl
import CQoSMapShim
