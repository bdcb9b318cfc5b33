package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getInt;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getIntBigEndian;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getLong;

/**
 * A reusable native array of {@code struct ibv_wc} that {@link CompletionQueue#poll} fills; typed accessors by
 * index. Allocated once, read without allocating. {@link #close()} frees the memory.
 */
public final class WorkCompletions implements AutoCloseable {
    /** {@code IBV_WC_WITH_IMM} of {@code enum ibv_wc_flags}. */
    private static final int IBV_WC_WITH_IMM = 1 << 1;
    /** {@code IBV_WC_WITH_INV}: a SEND_WITH_INV arrived and invalidated {@link #invalidatedRkey}. */
    private static final int IBV_WC_WITH_INV = 1 << 3;
    /** The kernel's {@code IB_WC_WITH_INVALIDATE}, as kernel rxe's provider reports it ({@link #hasInv(int, boolean)}). */
    private static final int KERNEL_WITH_INVALIDATE = 1 << 2;

    private final Arena arena = Arena.ofShared();
    private final int capacity;
    final long base;
    private boolean closed;

    public WorkCompletions(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity: " + capacity + " (expected: > 0)");
        }
        this.capacity = capacity;
        MemorySegment segment = arena.allocate(IbvWc.LAYOUT, capacity);
        this.base = segment.address();
    }

    public int capacity() {
        return capacity;
    }

    public long wrId(int i) {
        return getLong(base + offset(i) + IbvWc.WR_ID);
    }

    /** {@link IbvWcStatus}. */
    public int status(int i) {
        return getInt(base + offset(i) + IbvWc.STATUS);
    }

    /** {@link IbvWcOpcode}; only valid when {@link #status} is SUCCESS. */
    public int opcode(int i) {
        return getInt(base + offset(i) + IbvWc.OPCODE);
    }

    public int vendorErr(int i) {
        return getInt(base + offset(i) + IbvWc.VENDOR_ERR);
    }

    public int byteLen(int i) {
        return getInt(base + offset(i) + IbvWc.BYTE_LEN);
    }

    /** The immediate value in host byte order (it travels in network order); valid if {@link #hasImm}. */
    public int immData(int i) {
        return getIntBigEndian(base + offset(i) + IbvWc.IMM_DATA);
    }

    public int qpNum(int i) {
        return getInt(base + offset(i) + IbvWc.QP_NUM);
    }

    public int srcQp(int i) {
        return getInt(base + offset(i) + IbvWc.SRC_QP);
    }

    /** {@code IBV_WC_GRH} = 1, {@code IBV_WC_WITH_IMM} = 2, {@code IBV_WC_WITH_INV} = 8. */
    public int wcFlags(int i) {
        return getInt(base + offset(i) + IbvWc.WC_FLAGS);
    }

    public boolean hasImm(int i) {
        return (wcFlags(i) & IBV_WC_WITH_IMM) != 0;
    }

    /** Whether the receive was a SEND_WITH_INV that invalidated a memory window of this side. */
    public boolean hasInv(int i) {
        return (wcFlags(i) & IBV_WC_WITH_INV) != 0;
    }

    /**
     * {@link #hasInv}, also taking the flag kernel rxe reports instead: its provider passes the kernel's
     * {@code IB_WC_WITH_INVALIDATE} through, bit 2, which is {@code IBV_WC_IP_CSUM_OK} in the verbs ABI (observed
     * with Linux 6.1; native/tests/t_mw.c). Only for a device known to be kernel rxe, on an RC receive, where a
     * checksum flag has no other meaning.
     */
    public boolean hasInv(int i, boolean kernelRxe) {
        return (wcFlags(i) & (kernelRxe ? IBV_WC_WITH_INV | KERNEL_WITH_INVALIDATE : IBV_WC_WITH_INV)) != 0;
    }

    /** The rkey a SEND_WITH_INV invalidated; valid if {@link #hasInv}. */
    public int invalidatedRkey(int i) {
        return getInt(base + offset(i) + IbvWc.INVALIDATED_RKEY);
    }

    /** The library's description of {@link #status} ({@code ibv_wc_status_str}), e.g. "remote access error". */
    public String statusString(int i) {
        int status = status(i);
        try {
            return ((MemorySegment) LibIbverbs.IBV_WC_STATUS_STR.invokeExact(status)).reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** Every field of entry {@code i}, for logs and assertion messages. */
    public String toString(int i) {
        return "ibv_wc[wr_id=" + wrId(i) + ", status=" + IbvWcStatus.name(status(i)) + ", opcode="
                + IbvWcOpcode.name(opcode(i)) + ", byte_len=" + byteLen(i) + ", imm_data=0x"
                + Integer.toHexString(immData(i)) + ", qp_num=" + qpNum(i) + ", wc_flags=" + wcFlags(i)
                + ", vendor_err=" + vendorErr(i) + "]";
    }

    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("WorkCompletions is closed");
        }
    }

    /** The offset of entry {@code i}; throws if it is out of range or this array is closed. */
    private long offset(int i) {
        checkOpen();
        return Objects.checkIndex(i, capacity) * IbvWc.SIZE;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            arena.close();
        }
    }
}
