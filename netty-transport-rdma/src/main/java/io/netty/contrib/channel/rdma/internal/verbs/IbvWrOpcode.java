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
    /** Invalidates the type 2 memory window named by {@code invalidate_rkey} (a local operation). */
    public static final int LOCAL_INV = 7;
    /** Binds a type 2 memory window to this QP ({@code bind_mw}; a local operation). */
    public static final int BIND_MW = 8;
    /** A SEND that also invalidates the peer's window named by {@code invalidate_rkey}, bound to the peer's QP. */
    public static final int SEND_WITH_INV = 9;

    private IbvWrOpcode() {
    }
}
