package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getInt;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getLong;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.setInt;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.setIntBigEndian;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.setLong;

/**
 * A reusable native array of {@code struct ibv_send_wr}, each with its own {@code struct ibv_sge} list of
 * {@link #maxSge()} entries. Fields are set by index; {@link QueuePair#postSend} chains a contiguous range and
 * posts it in one call. Nothing here allocates after construction.
 *
 * <p>Scatter/gather entries are set from a {@link MemoryRegion} (bounds-checked against it) or from a native
 * {@link MemorySegment}, so that a work request can only point at memory that exists; a memory window bind
 * ({@link #bindMw}) is checked against its window and region the same way.
 */
public final class SendWorkRequests implements AutoCloseable {
    /** The access a window may grant ({@code IBV_ACCESS_*} remote rights, zero-based addressing). */
    private static final int WINDOW_ACCESS = IbvAccessFlags.REMOTE_WRITE | IbvAccessFlags.REMOTE_READ
            | IbvAccessFlags.REMOTE_ATOMIC | IbvAccessFlags.ZERO_BASED;
    private static final int WINDOW_WRITES = IbvAccessFlags.REMOTE_WRITE | IbvAccessFlags.REMOTE_ATOMIC;

    private final Arena arena = Arena.ofShared();
    private final int capacity;
    private final int maxSge;
    /** The {@code num_sge} of each request, as last written. */
    private final int[] numSges;
    final long base;
    private final long sgeBase;
    final MemorySegment badWr;
    private boolean closed;

    public SendWorkRequests(int capacity, int maxSge) {
        if (capacity <= 0 || maxSge <= 0) {
            throw new IllegalArgumentException("capacity " + capacity + ", maxSge " + maxSge + " (expected: > 0)");
        }
        this.capacity = capacity;
        this.maxSge = maxSge;
        this.numSges = new int[capacity];
        MemorySegment wrs = arena.allocate(IbvSendWr.LAYOUT, capacity);
        MemorySegment sges = arena.allocate(IbvSge.LAYOUT, (long) capacity * maxSge);
        this.badWr = arena.allocate(Layouts.POINTER_BITS);
        this.base = wrs.address();
        this.sgeBase = sges.address();
        for (int i = 0; i < capacity; i++) {
            setLong(base + i * IbvSendWr.SIZE + IbvSendWr.SG_LIST, sgeBase + (long) i * maxSge * IbvSge.SIZE);
        }
    }

    public int capacity() {
        return capacity;
    }

    public int maxSge() {
        return maxSge;
    }

    /**
     * Sets the common fields of request {@code i} and clears its SGE count, immediate/remote fields and window
     * (a {@link IbvWrOpcode#BIND_MW} without {@link #bindMw} is refused by the device, never binds a stale window).
     */
    public SendWorkRequests set(int i, long wrId, int opcode, int sendFlags) {
        long o = offset(i);
        setLong(base + o + IbvSendWr.WR_ID, wrId);
        setInt(base + o + IbvSendWr.OPCODE, opcode);
        setInt(base + o + IbvSendWr.SEND_FLAGS, sendFlags);
        writeNumSge(i, o, 0);
        setIntBigEndian(base + o + IbvSendWr.IMM_DATA, 0);
        setLong(base + o + IbvSendWr.WR_RDMA_REMOTE_ADDR, 0L);
        setInt(base + o + IbvSendWr.WR_RDMA_RKEY, 0);
        setLong(base + o + IbvSendWr.BIND_MW_MW, 0L);
        return this;
    }

    public SendWorkRequests wrId(int i, long wrId) {
        setLong(base + offset(i) + IbvSendWr.WR_ID, wrId);
        return this;
    }

    /** {@link IbvWrOpcode}. */
    public SendWorkRequests opcode(int i, int opcode) {
        setInt(base + offset(i) + IbvSendWr.OPCODE, opcode);
        return this;
    }

    /** {@link IbvSendFlags}. */
    public SendWorkRequests sendFlags(int i, int sendFlags) {
        setInt(base + offset(i) + IbvSendWr.SEND_FLAGS, sendFlags);
        return this;
    }

    /** The immediate value, in host byte order (written in network order, as the verbs ABI wants). */
    public SendWorkRequests immData(int i, int immData) {
        setIntBigEndian(base + offset(i) + IbvSendWr.IMM_DATA, immData);
        return this;
    }

    /** The remote side of an RDMA WRITE/READ. */
    public SendWorkRequests rdma(int i, long remoteAddr, int rkey) {
        long o = offset(i);
        setLong(base + o + IbvSendWr.WR_RDMA_REMOTE_ADDR, remoteAddr);
        setInt(base + o + IbvSendWr.WR_RDMA_RKEY, rkey);
        return this;
    }

    /**
     * The {@code bind_mw} of a {@link IbvWrOpcode#BIND_MW} request {@code i}: binds type 2 window {@code mw} to
     * {@code length} bytes at {@code offset} in {@code mr} under {@code rkey} (normally {@link
     * MemoryWindow#nextRkey()}), granting {@code mwAccessFlags} ({@link IbvAccessFlags} REMOTE_WRITE, REMOTE_READ,
     * REMOTE_ATOMIC, ZERO_BASED). Post it on a QP of the window's PD: the window is then valid on that QP only,
     * for the requests posted after the bind. After the post, record the rkey with {@link
     * MemoryWindow#updateRkey}. A window still bound must be invalidated first ({@link IbvWrOpcode#LOCAL_INV}):
     * the device completes a second bind with {@link IbvWcStatus#MW_BIND_ERR} and moves the QP to ERR. The
     * request holds the window's and the region's addresses: keep both open until it is posted.
     *
     * @throws IllegalStateException if the window or the region is closed
     * @throws IllegalArgumentException if the window is not type 2, the rkey is not one of the window's, the
     *         region is of another PD or not registered with {@link IbvAccessFlags#MW_BIND} (or a writable window
     *         on a region without {@link IbvAccessFlags#LOCAL_WRITE}), or the access flags are not window rights
     * @throws IndexOutOfBoundsException if the range is not inside the region
     */
    public SendWorkRequests bindMw(int i, MemoryWindow mw, int rkey, MemoryRegion mr, long offset, long length,
                                   int mwAccessFlags) {
        long o = offset(i);
        Objects.requireNonNull(mw, "mw");
        Objects.requireNonNull(mr, "mr");
        mw.checkOpen();
        mr.checkRange(offset, length);
        if (mw.type() != IbvMwType.TYPE_2) {
            throw new IllegalArgumentException("mw is a type " + mw.type() + " window: only type 2 windows are"
                    + " bound by a BIND_MW work request");
        }
        mw.checkSameWindow(rkey);
        if (mr.pd() != mw.pd()) {
            throw new IllegalArgumentException("mr and mw belong to different protection domains");
        }
        if ((mr.access() & IbvAccessFlags.MW_BIND) == 0) {
            throw new IllegalArgumentException("mr was registered without IbvAccessFlags.MW_BIND (access 0x"
                    + Integer.toHexString(mr.access()) + "): windows cannot be bound to it");
        }
        if ((mwAccessFlags & ~WINDOW_ACCESS) != 0) {
            throw new IllegalArgumentException("mwAccessFlags: 0x" + Integer.toHexString(mwAccessFlags)
                    + " (expected: REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC, ZERO_BASED)");
        }
        if ((mwAccessFlags & WINDOW_WRITES) != 0 && (mr.access() & IbvAccessFlags.LOCAL_WRITE) == 0) {
            throw new IllegalArgumentException("a window with remote write or atomic access needs an mr registered"
                    + " with IbvAccessFlags.LOCAL_WRITE");
        }
        setLong(base + o + IbvSendWr.BIND_MW_MW, mw.address());
        setInt(base + o + IbvSendWr.BIND_MW_RKEY, rkey);
        setLong(base + o + IbvSendWr.BIND_MW_MR, mr.address());
        setLong(base + o + IbvSendWr.BIND_MW_ADDR, mr.addr() + offset);
        setLong(base + o + IbvSendWr.BIND_MW_LENGTH, length);
        setInt(base + o + IbvSendWr.BIND_MW_ACCESS_FLAGS, mwAccessFlags);
        writeNumSge(i, o, 0);
        return this;
    }

    /**
     * The {@code invalidate_rkey} of a {@link IbvWrOpcode#LOCAL_INV} (a type 2 window of this QP's PD) or
     * {@link IbvWrOpcode#SEND_WITH_INV} (a window bound to the peer's QP) request {@code i}. It shares its bytes
     * with the immediate value: set one or the other.
     */
    public SendWorkRequests invalidateRkey(int i, int rkey) {
        setInt(base + offset(i) + IbvSendWr.INVALIDATE_RKEY, rkey);
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
     * nothing here can check the address, so it must come from a live registered buffer. As with every {@code sge}
     * method, the request's SGE count grows to include SGE {@code j}.
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
        writeNumSge(i, offset(i), numSge);
        return this;
    }

    public long wrId(int i) {
        return getLong(base + offset(i) + IbvSendWr.WR_ID);
    }

    public int numSge(int i) {
        return getInt(base + offset(i) + IbvSendWr.NUM_SGE);
    }

    private SendWorkRequests writeSge(int i, int j, long addr, int length, int lkey) {
        long o = offset(i);
        long s = (Objects.checkIndex(j, maxSge) + (long) i * maxSge) * IbvSge.SIZE;
        long sge = sgeBase + s;
        setLong(sge + IbvSge.ADDR, addr);
        setInt(sge + IbvSge.LENGTH, length);
        setInt(sge + IbvSge.LKEY, lkey);
        if (numSges[i] <= j) {
            writeNumSge(i, o, j + 1);
        }
        return this;
    }

    /** Sets {@code num_sge} of request {@code i} (at {@code o}) and its copy here, which spares a read of it. */
    private void writeNumSge(int i, long o, int numSge) {
        numSges[i] = numSge;
        setInt(base + o + IbvSendWr.NUM_SGE, numSge);
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
            setLong(base + o + IbvSendWr.NEXT, base + o + IbvSendWr.SIZE);
        }
        setLong(base + last + IbvSendWr.NEXT, 0L);
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

    /** The offset of entry {@code i}; throws if it is out of range or this array is closed. */
    private long offset(int i) {
        checkOpen();
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
