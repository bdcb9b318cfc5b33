package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getInt;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.getLong;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.setInt;
import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.setLong;

/**
 * A reusable native array of {@code struct ibv_recv_wr}, each with its own SGE list of {@link #maxSge()} entries,
 * posted by {@link QueuePair#postRecv} or {@link SharedReceiveQueue#postRecv}. Nothing here allocates after
 * construction.
 */
public final class RecvWorkRequests implements AutoCloseable {
    private final Arena arena = Arena.ofShared();
    private final int capacity;
    private final int maxSge;
    final long base;
    private final long sgeBase;
    final MemorySegment badWr;
    private boolean closed;

    public RecvWorkRequests(int capacity, int maxSge) {
        if (capacity <= 0 || maxSge <= 0) {
            throw new IllegalArgumentException("capacity " + capacity + ", maxSge " + maxSge + " (expected: > 0)");
        }
        this.capacity = capacity;
        this.maxSge = maxSge;
        MemorySegment wrs = arena.allocate(IbvRecvWr.LAYOUT, capacity);
        MemorySegment sges = arena.allocate(IbvSge.LAYOUT, (long) capacity * maxSge);
        this.badWr = arena.allocate(Layouts.POINTER_BITS);
        this.base = wrs.address();
        this.sgeBase = sges.address();
        for (int i = 0; i < capacity; i++) {
            setLong(base + i * IbvRecvWr.SIZE + IbvRecvWr.SG_LIST, sgeBase + (long) i * maxSge * IbvSge.SIZE);
        }
    }

    public int capacity() {
        return capacity;
    }

    public int maxSge() {
        return maxSge;
    }

    /** Request {@code i} receives into {@code length} bytes at {@code offset} of {@code mr} (one SGE). */
    public RecvWorkRequests set(int i, long wrId, MemoryRegion mr, long offset, int length) {
        wrId(i, wrId);
        numSge(i, 0);
        return sge(i, 0, mr, offset, length);
    }

    public RecvWorkRequests wrId(int i, long wrId) {
        setLong(base + offset(i) + IbvRecvWr.WR_ID, wrId);
        return this;
    }

    /** SGE {@code j} of request {@code i}: {@code length} bytes at {@code offset} in {@code mr}. */
    public RecvWorkRequests sge(int i, int j, MemoryRegion mr, long offset, int length) {
        mr.checkRange(offset, length);
        long o = offset(i);
        long s = (Objects.checkIndex(j, maxSge) + (long) i * maxSge) * IbvSge.SIZE;
        setLong(sgeBase + s + IbvSge.ADDR, mr.addr() + offset);
        setInt(sgeBase + s + IbvSge.LENGTH, length);
        setInt(sgeBase + s + IbvSge.LKEY, mr.lkey());
        if (getInt(base + o + IbvRecvWr.NUM_SGE) <= j) {
            setInt(base + o + IbvRecvWr.NUM_SGE, j + 1);
        }
        return this;
    }

    /** Request {@code i} receives into {@code length} bytes at {@code address}, registered under {@code lkey}. */
    public RecvWorkRequests setAddress(int i, long wrId, long address, int length, int lkey) {
        long o = offset(i);
        long s = (long) i * maxSge * IbvSge.SIZE;
        setLong(base + o + IbvRecvWr.WR_ID, wrId);
        setLong(sgeBase + s + IbvSge.ADDR, address);
        setInt(sgeBase + s + IbvSge.LENGTH, length);
        setInt(sgeBase + s + IbvSge.LKEY, lkey);
        setInt(base + o + IbvRecvWr.NUM_SGE, 1);
        return this;
    }

    /** The number of SGEs of request {@code i} (0 to {@link #maxSge()}). */
    public RecvWorkRequests numSge(int i, int numSge) {
        if (numSge < 0 || numSge > maxSge) {
            throw new IllegalArgumentException("numSge: " + numSge + " (expected: 0-" + maxSge + ")");
        }
        setInt(base + offset(i) + IbvRecvWr.NUM_SGE, numSge);
        return this;
    }

    public long wrId(int i) {
        return getLong(base + offset(i) + IbvRecvWr.WR_ID);
    }

    /** Links requests {@code first .. first + count - 1} into one list; returns the head's address. */
    long chain(int first, int count) {
        checkOpen();
        Objects.checkFromIndexSize(first, count, capacity);
        if (count == 0) {
            throw new IllegalArgumentException("count: 0 (expected: > 0)");
        }
        long last = (long) (first + count - 1) * IbvRecvWr.SIZE;
        for (long o = (long) first * IbvRecvWr.SIZE; o < last; o += IbvRecvWr.SIZE) {
            setLong(base + o + IbvRecvWr.NEXT, base + o + IbvRecvWr.SIZE);
        }
        setLong(base + last + IbvRecvWr.NEXT, 0L);
        return base + (long) first * IbvRecvWr.SIZE;
    }

    /** The index of the request at {@code address} (from {@code bad_wr}), or -1 if it is none of these requests. */
    int indexOf(long address) {
        long offset = address - base;
        if (offset < 0 || offset >= (long) capacity * IbvRecvWr.SIZE || offset % IbvRecvWr.SIZE != 0) {
            return -1;
        }
        return (int) (offset / IbvRecvWr.SIZE);
    }

    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("RecvWorkRequests is closed");
        }
    }

    /** The offset of entry {@code i}; throws if it is out of range or this array is closed. */
    private long offset(int i) {
        checkOpen();
        return Objects.checkIndex(i, capacity) * IbvRecvWr.SIZE;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            arena.close();
        }
    }
}
