package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A reusable native array of {@code struct ibv_send_wr}, each with its own {@code struct ibv_sge} list of
 * {@link #maxSge()} entries. Fields are set by index; {@link QueuePair#postSend} chains a contiguous range and
 * posts it in one call. Nothing here allocates after construction.
 *
 * <p>Scatter/gather entries are set from a {@link MemoryRegion} (bounds-checked against it) or from a native
 * {@link MemorySegment}, so that a work request can only point at memory that exists.
 */
public final class SendWorkRequests implements AutoCloseable {
    private final Arena arena = Arena.ofShared();
    private final int capacity;
    private final int maxSge;
    private final MemorySegment wrs;
    private final MemorySegment sges;
    final long base;
    final MemorySegment badWr;
    private boolean closed;

    public SendWorkRequests(int capacity, int maxSge) {
        if (capacity <= 0 || maxSge <= 0) {
            throw new IllegalArgumentException("capacity " + capacity + ", maxSge " + maxSge + " (expected: > 0)");
        }
        this.capacity = capacity;
        this.maxSge = maxSge;
        this.wrs = arena.allocate(IbvSendWr.LAYOUT, capacity);
        this.sges = arena.allocate(IbvSge.LAYOUT, (long) capacity * maxSge);
        this.badWr = arena.allocate(Layouts.POINTER_BITS);
        this.base = wrs.address();
        for (int i = 0; i < capacity; i++) {
            IbvSendWr.SG_LIST.set(wrs, i * IbvSendWr.SIZE, sges.address() + (long) i * maxSge * IbvSge.SIZE);
        }
    }

    public int capacity() {
        return capacity;
    }

    public int maxSge() {
        return maxSge;
    }

    /** Sets the common fields of request {@code i} and clears its SGE count and immediate/remote fields. */
    public SendWorkRequests set(int i, long wrId, int opcode, int sendFlags) {
        long o = offset(i);
        IbvSendWr.WR_ID.set(wrs, o, wrId);
        IbvSendWr.OPCODE.set(wrs, o, opcode);
        IbvSendWr.SEND_FLAGS.set(wrs, o, sendFlags);
        IbvSendWr.NUM_SGE.set(wrs, o, 0);
        IbvSendWr.IMM_DATA.set(wrs, o, 0);
        IbvSendWr.WR_RDMA_REMOTE_ADDR.set(wrs, o, 0L);
        IbvSendWr.WR_RDMA_RKEY.set(wrs, o, 0);
        return this;
    }

    public SendWorkRequests wrId(int i, long wrId) {
        IbvSendWr.WR_ID.set(wrs, offset(i), wrId);
        return this;
    }

    /** {@link IbvWrOpcode}. */
    public SendWorkRequests opcode(int i, int opcode) {
        IbvSendWr.OPCODE.set(wrs, offset(i), opcode);
        return this;
    }

    /** {@link IbvSendFlags}. */
    public SendWorkRequests sendFlags(int i, int sendFlags) {
        IbvSendWr.SEND_FLAGS.set(wrs, offset(i), sendFlags);
        return this;
    }

    /** The immediate value, in host byte order (written in network order, as the verbs ABI wants). */
    public SendWorkRequests immData(int i, int immData) {
        IbvSendWr.IMM_DATA.set(wrs, offset(i), immData);
        return this;
    }

    /** The remote side of an RDMA WRITE/READ. */
    public SendWorkRequests rdma(int i, long remoteAddr, int rkey) {
        long o = offset(i);
        IbvSendWr.WR_RDMA_REMOTE_ADDR.set(wrs, o, remoteAddr);
        IbvSendWr.WR_RDMA_RKEY.set(wrs, o, rkey);
        return this;
    }

    /** SGE {@code j} of request {@code i}: {@code length} bytes at {@code offset} in {@code mr}. */
    public SendWorkRequests sge(int i, int j, MemoryRegion mr, long offset, int length) {
        mr.checkRange(offset, length);
        return writeSge(i, j, mr.addr() + offset, length, mr.lkey());
    }

    /**
     * SGE {@code j} of request {@code i}: all of {@code segment}, which must be native memory inside a region
     * registered with {@code lkey} (or any native memory for an {@link IbvSendFlags#INLINE} send).
     */
    public SendWorkRequests sge(int i, int j, MemorySegment segment, int lkey) {
        Objects.requireNonNull(segment, "segment");
        if (!segment.isNative()) {
            throw new IllegalArgumentException("segment is not native memory");
        }
        if (segment.byteSize() > 0xFFFF_FFFFL) {
            throw new IllegalArgumentException("segment is larger than 4 GiB: " + segment.byteSize());
        }
        return writeSge(i, j, segment.address(), (int) segment.byteSize(), lkey);
    }

    /**
     * SGE {@code j} of request {@code i}: {@code length} bytes at native {@code address}, inside a region
     * registered with {@code lkey}. For callers that track registered memory themselves (the pooled allocator):
     * nothing here can check the address, so it must come from a live registered buffer.
     */
    public SendWorkRequests sgeAddress(int i, int j, long address, int length, int lkey) {
        if (address == 0 || length < 0) {
            throw new IllegalArgumentException("address 0x" + Long.toHexString(address) + ", length " + length);
        }
        return writeSge(i, j, address, length, lkey);
    }

    /** The number of SGEs of request {@code i} (0 to {@link #maxSge()}). */
    public SendWorkRequests numSge(int i, int numSge) {
        if (numSge < 0 || numSge > maxSge) {
            throw new IllegalArgumentException("numSge: " + numSge + " (expected: 0-" + maxSge + ")");
        }
        IbvSendWr.NUM_SGE.set(wrs, offset(i), numSge);
        return this;
    }

    public long wrId(int i) {
        return (long) IbvSendWr.WR_ID.get(wrs, offset(i));
    }

    public int numSge(int i) {
        return (int) IbvSendWr.NUM_SGE.get(wrs, offset(i));
    }

    private SendWorkRequests writeSge(int i, int j, long addr, int length, int lkey) {
        long o = offset(i);
        long s = (Objects.checkIndex(j, maxSge) + (long) i * maxSge) * IbvSge.SIZE;
        IbvSge.ADDR.set(sges, s, addr);
        IbvSge.LENGTH.set(sges, s, length);
        IbvSge.LKEY.set(sges, s, lkey);
        if ((int) IbvSendWr.NUM_SGE.get(wrs, o) <= j) {
            IbvSendWr.NUM_SGE.set(wrs, o, j + 1);
        }
        return this;
    }

    /** Links requests {@code first .. first + count - 1} into one list; returns the head's address. */
    long chain(int first, int count) {
        checkOpen();
        Objects.checkFromIndexSize(first, count, capacity);
        if (count == 0) {
            throw new IllegalArgumentException("count: 0 (expected: > 0)");
        }
        long last = (long) (first + count - 1) * IbvSendWr.SIZE;
        for (long o = (long) first * IbvSendWr.SIZE; o < last; o += IbvSendWr.SIZE) {
            IbvSendWr.NEXT.set(wrs, o, base + o + IbvSendWr.SIZE);
        }
        IbvSendWr.NEXT.set(wrs, last, 0L);
        return base + (long) first * IbvSendWr.SIZE;
    }

    /**
     * The index of the request at {@code address} (from {@code bad_wr}), or -1 if it is none of these requests:
     * the kernel's rxe leaves {@code bad_wr} NULL when the kernel refuses the whole post.
     */
    int indexOf(long address) {
        long offset = address - base;
        if (offset < 0 || offset >= (long) capacity * IbvSendWr.SIZE || offset % IbvSendWr.SIZE != 0) {
            return -1;
        }
        return (int) (offset / IbvSendWr.SIZE);
    }

    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("SendWorkRequests is closed");
        }
    }

    private long offset(int i) {
        return Objects.checkIndex(i, capacity) * IbvSendWr.SIZE;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            arena.close();
        }
    }
}
