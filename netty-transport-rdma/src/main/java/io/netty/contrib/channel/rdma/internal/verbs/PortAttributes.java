package io.netty.contrib.channel.rdma.internal.verbs;

/**
 * The parts of {@code struct ibv_port_attr} the transport uses.
 *
 * @param state      {@code enum ibv_port_state} (4 = ACTIVE)
 * @param maxMtu     {@code enum ibv_mtu} (1 = 256 ... 5 = 4096)
 * @param activeMtu  {@code enum ibv_mtu}
 * @param linkLayer  1 = InfiniBand, 2 = Ethernet (RoCE)
 */
public record PortAttributes(int state, int maxMtu, int activeMtu, int gidTblLen, int maxMsgSz, int pkeyTblLen,
                             int lid, int linkLayer) {
    public static final int STATE_ACTIVE = 4;
}
