package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_wr_opcode}: the operation of a send work request. */
public final class IbvWrOpcode {
    public static final int RDMA_WRITE = 0;
    public static final int RDMA_WRITE_WITH_IMM = 1;
    public static final int SEND = 2;
    public static final int SEND_WITH_IMM = 3;
    public static final int RDMA_READ = 4;
    public static final int ATOMIC_CMP_AND_SWP = 5;
    public static final int ATOMIC_FETCH_AND_ADD = 6;

    private IbvWrOpcode() {
    }
}
