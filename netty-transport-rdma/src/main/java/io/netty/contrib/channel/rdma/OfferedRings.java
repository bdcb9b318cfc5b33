package io.netty.contrib.channel.rdma;

import io.netty.channel.EventLoop;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;

/**
 * The receive rings one connection offers its peer for large writes (docs/PROTOCOL.md §3), on demand: none while
 * only small messages flow; one, registered when the peer asks for it ({@code FLAG_WANTS_RING}) and withdrawn
 * when it has been idle; a new one when the buffers the reader holds pin half of the current one (zero-copy
 * delivery). Each ring is sized, when offered, by what is left of the loop's {@link RingMemory}; while that is too
 * little, none is offered (large messages go on as SENDs) and the connection asks again later. A ring that is
 * replaced or withdrawn retires: writes may still land in it until the peer confirms the RING message that
 * replaced it, and its memory lives on until the last buffer over it is released.
 *
 * <p>Which ring a write landed in is told by the immediate's generation bit, which flips with every RING
 * message. Loop-thread confined.
 */
final class OfferedRings {
    private final ProtectionDomain pd;
    /** The loop's ring memory: bounds every ring's size. */
    private final RingMemory memory;
    /** Bytes of each ring at most; 0 when this side offers none (large messages travel as SENDs). */
    private final int size;
    /** The smallest ring worth offering this connection. */
    private final int minimum;
    /** The size of the ring to announce next, set when {@link #announceDue()} says a new one is due. */
    private int nextSize;
    /** No memory windows: rings are plain regions whose rkey works on every QP of the PD (explicitly allowed). */
    private final boolean pdWide;
    /** Writes expected outstanding in a ring at once: the receive credits. */
    private final int capacity;
    private final RdmaByteBufAllocator alloc;
    private final EventLoop loop;
    private final ReceiveRing.Owner owner;

    /** The ring the peer writes to now; null when this side offers none. */
    private ReceiveRing current;
    /** The ring before it, while buffers over it are held or writes to it may still land; else null. */
    private ReceiveRing retired;
    /** The peer may still write to {@link #retired}: it has not yet confirmed the RING that replaced it. */
    private boolean retiredMayReceive;
    /** The generation bit of writes to the ring offered now. */
    private boolean generation;
    /** The peer has a large write waiting and this side offers no ring: offer one. */
    private boolean wanted;
    /** The ring received nothing for a while: withdraw it. */
    private boolean idle;
    private long arrivalsAtCheck;
    /** Why the last ring registration failed, if it did; no more rings are offered. */
    private RuntimeException failure;

    OfferedRings(ProtectionDomain pd, RingMemory memory, int size, int minimum, boolean pdWide, int capacity,
                 RdmaByteBufAllocator alloc, EventLoop loop, ReceiveRing.Owner owner) {
        this.pd = pd;
        this.memory = memory;
        this.size = size;
        this.minimum = minimum;
        this.pdWide = pdWide;
        this.capacity = capacity;
        this.alloc = alloc;
        this.loop = loop;
        this.owner = owner;
    }

    /** The ring offered now, or null. */
    ReceiveRing current() {
        return current;
    }

    /** The peer has a write larger than a receive slot waiting ({@code FLAG_WANTS_RING}). */
    void peerWantsRing() {
        if (current == null && size > 0 && failure == null) {
            wanted = true;
        }
    }

    /**
     * The ring a write with this immediate landed in. A write into the current ring also tells that the peer has
     * left the retired one: writes land in order.
     *
     * @throws ProtocolException when no ring of that generation may receive writes
     */
    ReceiveRing ringOf(int immediate) {
        boolean gen = Immediate.generation(immediate);
        if (current != null && gen == current.generation) {
            peerLeftRetired();
            return current;
        }
        if (retiredMayReceive && gen == retired.generation) {
            return retired;
        }
        throw new ProtocolException("ring write of generation " + (gen ? 1 : 0)
                + (current == null ? " while this side offers no ring" : " after the switch to a new ring"));
    }

    /** The peer confirmed the last RING ({@code FLAG_RING_SEEN}): nothing more lands in the retired ring. */
    void peerLeftRetired() {
        if (retiredMayReceive) {
            retiredMayReceive = false;
            // Nobody may write it any more: end remote access now, whatever buffers over it are still held.
            retired.closeWindow();
            unref(retired);
        }
    }

    /**
     * Whether to send a RING message: a ring is wanted, the current one is idle, or held buffers pin half of it.
     * Never while the peer may still write to a retired ring: there is one generation bit, so two rings at most;
     * nor, for a ring asked for, while the loop's ring memory has too little left for one. A ring that replaces one
     * pinned by held buffers (zero copy, trusted peers) has the size of the one it replaces, whatever is left: the
     * pinned ring returns its space only in order, so without the replacement the writer would wait for the
     * reader, and a reader holding everything until the end would wait forever.
     */
    boolean announceDue() {
        if (retiredMayReceive) {
            return false;
        }
        if (current == null) {
            if (!wanted || failure != null) {
                return false;
            }
            nextSize = memory.sizeFor(size, minimum);
            return nextSize > 0;
        }
        if (idle) {
            return true;
        }
        if (failure == null && retired == null && current.held > 0
                && current.releases.pinned() >= current.size / 2) {
            nextSize = (int) current.size;
            return true;
        }
        return false;
    }

    /**
     * The ring to announce next: a new one, or null to withdraw the idle current one. A failed registration is
     * remembered: no ring is offered again, large messages go on as SENDs.
     *
     * @throws RuntimeException when the ring cannot be allocated or registered
     */
    ReceiveRing next() {
        if (idle) {
            return null;
        }
        int ringSize = nextSize != 0 ? nextSize : memory.sizeFor(size, minimum);
        if (ringSize == 0) {
            throw new IllegalStateException("the loop's ring memory has no room for another ring");
        }
        try {
            return ReceiveRing.create(pd, memory, ringSize, pdWide, !generation, capacity, alloc, loop, owner);
        } catch (RuntimeException e) {
            failure = e;
            wanted = false;
            throw e;
        }
    }

    /** The RING message announcing {@code next} (from {@link #next()}) was posted: the current ring retires. */
    void announced(ReceiveRing next) {
        if (current != null) {
            // A ring retired before, still alive under held buffers, frees itself when they are released.
            retired = current;
            retiredMayReceive = true;
        }
        generation = !generation;
        current = next;
        wanted = false;
        idle = false;
        nextSize = 0;
    }

    /**
     * Whether the peer may be unable to write for want of ring space that was freed but not yet returned: its
     * free space, as this side knows it, is under half the ring (a write takes at most a quarter plus a skipped
     * tail of at most a quarter). Ring writes carry no credits, so without a CREDIT message two peers that both
     * write only ring writes could each wait for the other.
     */
    boolean creditsDue() {
        if (current == null) {
            return false;
        }
        long owed = current.releases.owed();
        return owed >= current.size / 2 || owed > 0 && current.releases.pinned() + owed >= current.size / 2;
    }

    /** Ring space freed since the last message, to return in the next one (0 without a ring). */
    int takeOwed() {
        return current == null ? 0 : (int) current.releases.takeOwed();
    }

    /**
     * Whether write {@code seq} of ring {@code r} may be handed over as a buffer over the ring: only in the current
     * ring, with none retired, and while held buffers would cover at most half of it.
     */
    boolean mayHold(ReceiveRing r, long seq) {
        return r == current && retired == null && r.held + r.releases.span(seq) <= r.size / 2;
    }

    /**
     * The reader released a buffer over write {@code seq} of {@code r}; the ring's space comes back. Returns
     * whether {@code r} is the current ring (its space is the peer's credit). Drops the buffer's reference.
     */
    boolean bufferReleased(ReceiveRing r, long seq) {
        r.held -= r.releases.span(seq);
        r.releases.release(seq);
        unref(r);
        return r == current;
    }

    /** Write {@code seq} of {@code r} was delivered as a copy: its space and reference go back. */
    void delivered(ReceiveRing r, long seq) {
        r.releases.release(seq);
        unref(r);
    }

    /** Drops a reference to {@code r}; a retired ring nobody references any more is forgotten. */
    void unref(ReceiveRing r) {
        r.unref();
        if (r == retired && r.refs.get() == 0) {
            retired = null;
        }
    }

    /**
     * A periodic look: a ring that received nothing since the last look and holds nothing becomes idle, to be
     * withdrawn (memory follows traffic). Returns whether it is idle, so that the caller tries again to withdraw it.
     */
    boolean checkIdle() {
        ReceiveRing r = current;
        if (r == null) {
            return false;
        }
        boolean unused = r.arrivals == arrivalsAtCheck && r.releases.outstanding() == 0 && r.held == 0;
        arrivalsAtCheck = r.arrivals;
        if (unused) {
            idle = true;
        }
        return unused;
    }

    /** Ends remote access to every ring, before the queue pair is destroyed. */
    void closeWindows() {
        if (current != null) {
            current.closeWindow();
        }
        if (retired != null) {
            retired.closeWindow();
        }
    }

    /** Drops the connection's references: rings free themselves once no buffer over them is held. */
    void release() {
        if (current != null) {
            current.unref();
            current = null;
        }
        if (retired != null && retiredMayReceive) {
            retiredMayReceive = false;
            retired.unref();
        }
    }

    @Override
    public String toString() {
        return "ring=" + current + ", retired=" + retired + ", retiredMayReceive=" + retiredMayReceive;
    }
}
