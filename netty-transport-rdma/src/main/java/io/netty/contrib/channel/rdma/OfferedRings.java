package io.netty.contrib.channel.rdma;

import io.netty.channel.EventLoop;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.RingSlabs;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;

/**
 * The receive rings one connection offers its peer for large writes (docs/PROTOCOL.md §3), on demand: none while
 * only small messages flow; one, registered when the peer asks for it ({@code FLAG_WANTS_RING}) and withdrawn
 * when it has been idle, or when it is more than twice its fair share of the loop's {@link RingMemory} while other
 * connections wait for one. Each ring is sized, when offered, by that share and by what is left; while that is too
 * little, none is offered (large messages go on as SENDs) and the connection asks again later. A ring that is
 * withdrawn retires: writes may still land in it until the peer confirms the RING message that withdrew
 * it, and its memory lives on until the last buffer over it is released.
 *
 * <p>The slabs of a ring ({@link RingSlabs}) go round between the writer and this side: the windows of the slabs
 * the writer left are invalidated ({@link #invalidate}) before their writes are delivered, and bound again
 * ({@link #rebind}) once the reader has released them; the rebound slabs go back to the writer in the next
 * header ({@link #takeOwed()}). Writes are handed over as buffers over the ring while the reader holds buffers over
 * at most half of the slabs; beyond that they are copied, so that the writer always has slabs to write.
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
    /** This side's receive slot: slabs are several of them. */
    private final int slotSize;
    /** The size of the ring to announce next, set when {@link #announceDue()} says a new one is due. */
    private int nextSize;
    /** No memory windows: rings are plain regions whose rkey works on every QP of the PD (explicitly allowed). */
    private final boolean pdWide;
    private final RdmaByteBufAllocator alloc;
    private final EventLoop loop;
    private final ReceiveRing.Owner owner;

    /** The ring the peer writes to now; null when this side offers none. */
    private ReceiveRing current;
    /** The ring before it, while buffers over it are held or writes to it may still land; else null. */
    private ReceiveRing retired;
    /** The peer may still write to {@link #retired}: it has not yet confirmed the RING that replaced it. */
    private boolean retiredMayReceive;
    /**
     * The peer has not yet confirmed the last RING message (RING_SEEN, or a write into the ring it offered). A
     * RING_SEEN names no message, so no other RING goes out meanwhile: it would be taken as confirmed by the
     * RING_SEEN of the one before, and the peer's writes to the ring it still knows refused.
     */
    private boolean unconfirmed;
    /** The generation bit of writes to the ring offered now. */
    private boolean generation;
    /** The peer has a large write waiting and this side offers no ring: offer one. */
    private boolean wanted;
    /** The ring received nothing for a while: withdraw it. */
    private boolean idle;
    /** {@link #announceDue()} decided to withdraw the current ring (idle, or more than its share). */
    private boolean withdraw;
    /** What this connection counts as in the loop's ring demand: 0 none, 1 waiting for a ring, 2 having one. */
    private int demand;
    private long arrivalsAtCheck;
    /** Why the last ring registration failed, if it did; no more rings are offered. */
    private RuntimeException failure;

    OfferedRings(ProtectionDomain pd, RingMemory memory, int size, int minimum, int slotSize, boolean pdWide,
                 RdmaByteBufAllocator alloc, EventLoop loop, ReceiveRing.Owner owner) {
        this.pd = pd;
        this.memory = memory;
        this.size = size;
        this.minimum = minimum;
        this.slotSize = slotSize;
        this.pdWide = pdWide;
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
            countDemand();
        }
    }

    /** Tells the loop's ring memory whether this connection has a ring, waits for one, or neither. */
    private void countDemand() {
        int now = current != null ? 2 : wanted ? 1 : 0;
        if (now != demand) {
            memory.demand(demand, now);
            demand = now;
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

    /**
     * Whether the peer is filling a slab it has not left (SEAL): it seals before anything else it sends, so a SEND
     * now is a protocol error.
     */
    boolean peerWriting() {
        return current != null && current.slabs.writing() || retiredMayReceive && retired.slabs.writing();
    }

    /** The peer confirmed the last RING ({@code FLAG_RING_SEEN}): nothing more lands in the retired ring. */
    void peerLeftRetired() {
        unconfirmed = false;
        if (retiredMayReceive) {
            retiredMayReceive = false;
            // Its last slab is closed: invalidated like any other before its writes are delivered. The windows go
            // when the last reference does (an invalidation in flight holds one).
            retired.slabs.writerLeft();
            unref(retired);
        }
    }

    /**
     * Whether to send a RING message: a ring is wanted, or the current one is idle. Never while the peer may still
     * write to a retired ring: there is one generation bit, so two rings at most; nor while the last RING is
     * unconfirmed; nor, for a ring asked for, while the loop's ring memory has too little left for one; nor for an
     * idle ring that received writes since it was found idle.
     */
    boolean announceDue() {
        if (unconfirmed || retiredMayReceive || current != null && retired != null
                && (retired.slabs.closedPending() || retired.slabs.invalidating())) {
            // A withdrawal would retire the current ring while the retired one still has writes to deliver.
            return false;
        }
        if (current == null) {
            if (!wanted || failure != null) {
                return false;
            }
            nextSize = memory.sizeFor(size, minimum);
            return nextSize > 0 && (pdWide || memory.arena(pd, alloc.pool().pageMode()).fits(nextSize));
        }
        if (idle && current.arrivals != arrivalsAtCheck) {
            idle = false;
        }
        // A ring far above its share while others wait: withdrawn, offered again at its share when next asked.
        withdraw = idle || memory.oversized(current.size, minimum);
        return withdraw;
    }

    /**
     * The ring to announce next: a new one, cut into as many slabs as a RING message fits the peer's receive slot
     * of {@code peerSlot} bytes, or null to withdraw the idle current one. A failed registration is remembered: no
     * ring is offered again, large messages go on as SENDs.
     *
     * @throws RuntimeException when the ring cannot be allocated or registered
     */
    ReceiveRing next(int peerSlot) {
        if (current != null && withdraw) {
            return null;
        }
        int ringSize = nextSize != 0 ? nextSize : memory.sizeFor(size, minimum);
        if (ringSize == 0) {
            throw new IllegalStateException("the loop's ring memory has no room for another ring");
        }
        try {
            return ReceiveRing.create(pd, memory, ringSize, ReceiveRing.slabCount(ringSize, slotSize, peerSlot),
                    pdWide, !generation, alloc, loop, owner);
        } catch (RuntimeException e) {
            failure = e;
            wanted = false;
            countDemand();
            throw e;
        }
    }

    /** The RING message announcing {@code next} (from {@link #next}) was posted: the current ring retires. */
    void announced(ReceiveRing next) {
        if (current != null) {
            // A ring retired before, still alive under held buffers, frees itself when they are released.
            retired = current;
            retiredMayReceive = true;
        }
        generation = !generation;
        current = next;
        unconfirmed = true;
        wanted = false;
        idle = false;
        withdraw = false;
        countDemand();
        nextSize = 0;
    }

    /**
     * Whether the peer may be short of slabs that were bound again but not yet returned: half of them are owed,
     * or some are and the peer has at most half left. Ring writes carry no header, so without a CREDIT message
     * two peers that both write only ring writes could each wait for the other.
     */
    boolean creditsDue() {
        if (current == null) {
            return false;
        }
        RingSlabs s = current.slabs;
        int owed = s.returnable();
        return owed > 0 && (2 * owed >= s.count() || 2 * s.granted() <= s.count());
    }

    /** Slabs bound again since the last message, to return in the next one, bit k for slab k (0 without a ring). */
    int takeOwed() {
        return current == null ? 0 : current.slabs.takeReturned();
    }

    /** Whether slabs wait to be invalidated or bound again. */
    boolean windowWorkDue() {
        return current != null && (current.slabs.closedPending() || current.slabs.unboundPending())
                || retired != null && retired.slabs.closedPending();
    }

    /**
     * The queue pair is in ERR (the peer left): no write lands in any slab any more, so the slab the peer was filling
     * counts as left and every closed slab as invalidated, without an invalidation to post (it could only flush):
     * what arrived before can be delivered.
     */
    void queuePairFailed() {
        for (ReceiveRing r : new ReceiveRing[] {current, retired}) {
            if (r != null) {
                r.slabs.writerLeft();
                for (int m = r.slabs.takeClosed(Immediate.MAX_SLABS); m != 0; m &= m - 1) {
                    r.slabs.invalidated(Integer.numberOfTrailingZeros(m));
                }
            }
        }
    }

    /**
     * Adds the invalidations of up to {@code max} closed slabs to {@code sends}; with PD-wide rkeys (no windows) the
     * slabs count as invalidated at once. Returns how many work requests it added.
     */
    int invalidate(SendQueue sends, int max) {
        int added = invalidate(current, sends, max);
        return added + invalidate(retired, sends, max - added);
    }

    private static int invalidate(ReceiveRing r, SendQueue sends, int max) {
        if (r == null || max <= 0 || !r.slabs.closedPending()) {
            return 0;
        }
        int added = 0;
        for (int m = r.slabs.takeClosed(r.hasWindows() ? max : Immediate.MAX_SLABS); m != 0; m &= m - 1) {
            int slab = Integer.numberOfTrailingZeros(m);
            if (r.hasWindows()) {
                r.invalidate(sends, slab);
                added++;
            } else {
                r.slabs.invalidated(slab);
            }
        }
        return added;
    }

    /**
     * Adds the binds of up to {@code max} released slabs of the current ring under their next rkeys; returns the
     * slabs, bit k for slab k, for {@link #rebound} once posted.
     */
    int rebind(SendQueue sends, int max) {
        ReceiveRing r = current;
        if (r == null || max <= 0 || !r.slabs.unboundPending()) {
            return 0;
        }
        int slabs = r.slabs.takeUnbound(r.hasWindows() ? max : Immediate.MAX_SLABS);
        if (r.hasWindows()) {
            for (int m = slabs; m != 0; m &= m - 1) {
                r.rebind(sends, Integer.numberOfTrailingZeros(m));
            }
        }
        return slabs;
    }

    /** The binds of {@link #rebind} were posted. */
    void rebound(int slabs) {
        ReceiveRing r = current;
        if (r != null && r.hasWindows()) {
            for (int m = slabs; m != 0; m &= m - 1) {
                r.rebound(Integer.numberOfTrailingZeros(m));
            }
        }
    }

    /**
     * Whether a write in {@code slab} of ring {@code r} (current or retired: its slabs are invalidated alike) may be
     * handed over as a buffer over the ring: under windows, and while the reader would hold buffers over at most
     * half of its slabs. A retired ring held that way stays registered, and counted in the loop's ring memory, until
     * its last buffer is released.
     */
    boolean mayHold(ReceiveRing r, int slab) {
        return r.hasWindows() && (r.holds(slab) || 2 * (r.heldSlabs + 1) <= r.slabs.count());
    }

    /**
     * The reader released a buffer over a write in {@code slab} of {@code r}. Returns whether {@code r} is the
     * current ring (its slabs are the peer's credit). Drops the buffer's reference.
     */
    boolean bufferReleased(ReceiveRing r, int slab) {
        r.bufferReleased(slab);
        r.slabs.release(slab);
        unref(r);
        return r == current;
    }

    /** A write in {@code slab} of {@code r} was delivered as a copy: its slab space and reference go back. */
    void delivered(ReceiveRing r, int slab) {
        r.slabs.release(slab);
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
        // A ring the peer has not confirmed yet may simply not have been written to yet.
        boolean unused = !unconfirmed && r.arrivals == arrivalsAtCheck && r.slabs.quiet() && r.heldSlabs == 0;
        arrivalsAtCheck = r.arrivals;
        if (unused) {
            idle = true;
        }
        return unused;
    }

    /** Ends remote access to every ring, before the queue pair is destroyed. */
    void closeWindows() {
        if (current != null) {
            current.closeWindows();
        }
        if (retired != null) {
            retired.closeWindows();
        }
    }

    /** Drops the connection's references: rings free themselves once no buffer over them is held. */
    void release() {
        if (current != null) {
            current.unref();
            current = null;
        }
        wanted = false;
        countDemand();
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
