package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_wc_opcode}: what a work completion completed; receive opcodes have {@link #RECV} set. */
public final class IbvWcOpcode {
    public static final int SEND = 0;
    public static final int RDMA_WRITE = 1;
    public static final int RDMA_READ = 2;
    public static final int COMP_SWAP = 3;
    public static final int FETCH_ADD = 4;
    public static final int BIND_MW = 5;
    public static final int LOCAL_INV = 6;
    public static final int RECV = 1 << 7;
    public static final int RECV_RDMA_WITH_IMM = RECV + 1;

    private IbvWcOpcode() {
    }

    public static String name(int opcode) {
        return switch (opcode) {
            case SEND -> "SEND";
            case RDMA_WRITE -> "RDMA_WRITE";
            case RDMA_READ -> "RDMA_READ";
            case COMP_SWAP -> "COMP_SWAP";
            case FETCH_ADD -> "FETCH_ADD";
            case BIND_MW -> "BIND_MW";
            case LOCAL_INV -> "LOCAL_INV";
            case RECV -> "RECV";
            case RECV_RDMA_WITH_IMM -> "RECV_RDMA_WITH_IMM";
            default -> "UNKNOWN(" + opcode + ")";
        };
    }
}
