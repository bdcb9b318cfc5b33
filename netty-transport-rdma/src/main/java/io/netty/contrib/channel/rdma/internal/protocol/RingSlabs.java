package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The receiver's side of one receive ring cut into slabs (docs/PROTOCOL.md §3): which slabs the writer may write,
 * where each incoming write lies, and the life of each slab between two grants. A slab is writable through a
 * memory window of its own; the writer fills one slab at a time and leaves it (SEAL, or a write into another slab);
 * this side then invalidates the slab's window before any of its bytes is delivered, so that nothing handed to the
 * reader can be written by the peer any more, and binds it again (a new rkey) once the reader has released every
 * write in it; only then does the slab go back to the writer.
 *
 * <pre>
 *  GRANTED ──first write──▶ OPEN ──SEAL / write elsewhere / peer left──▶ CLOSED ──{@link #takeClosed}──▶
 *  INVALIDATING ──{@link #invalidated}──▶ INVALID (deliverable) ──last write released──▶ UNBOUND
 *  ──{@link #takeUnbound}──▶ BOUND ──{@link #takeReturned()}──▶ GRANTED
 *
 *  CLOSED by a SEAL message whose SEND_WITH_INV invalidated the window ──{@link #invalidatedByPeer}──▶ INVALID
 * </pre>
 *
 * <p>Slabs return in any order: a reader holding the buffers of one slab keeps that slab, not the ring.
 * Loop-thread confined.
 */
public final class RingSlabs {
    public static final byte GRANTED = 0;
    public static final byte OPEN = 1;
    public static final byte CLOSED = 2;
    public static final byte INVALIDATING = 3;
    public static final byte INVALID = 4;
    public static final byte UNBOUND = 5;
    public static final byte BOUND = 6;

    private final int count;
    private final long slabSize;
    private final byte[] states;
    /** Writes that arrived in each slab and are not yet released. */
    private final int[] outstanding;
    /** The slab the writer is filling, or -1. */
    private int open = -1;
    /** Where the next write lands in the open slab. */
    private long cursor;
    private long lastOffset;
    /** Slabs the writer may write (GRANTED), as this side knows. */
    private int granted;
    private int closedMask;
    private int unboundMask;
    private int boundMask;

    public RingSlabs(int count, long slabSize) {
        if (count < 1 || count > Immediate.MAX_SLABS) {
            throw new IllegalArgumentException("count: " + count + " (expected: 1-" + Immediate.MAX_SLABS + ')');
        }
        if (slabSize <= 0 || slabSize % Immediate.ALIGNMENT != 0 || slabSize > MessageHeader.MAX_SLAB_SIZE) {
            throw new IllegalArgumentException("slabSize: " + slabSize + " (expected: a multiple of "
                    + Immediate.ALIGNMENT + " up to " + MessageHeader.MAX_SLAB_SIZE + ')');
        }
        this.count = count;
        this.slabSize = slabSize;
        this.states = new byte[count];
        this.outstanding = new int[count];
        this.granted = count;
    }

    public int count() {
        return count;
    }

    public long slabSize() {
        return slabSize;
    }

    /**
     * Accounts an incoming write announced by {@code immediate}.
     *
     * @return the slab it landed in, to pass to {@link #release(int)}; {@link #lastOffset()} is where its bytes lie
     * @throws ProtocolException when the write does not land where the protocol lets it
     */
    public int arrive(int immediate) {
        int length = Immediate.length(immediate);
        int slab = Immediate.slab(immediate);
        if (length == 0) {
            throw new ProtocolException("ring write of length 0");
        }
        if (slab >= count) {
            throw new ProtocolException("ring write into slab " + slab + " of a ring of " + count + " slabs");
        }
        if (slab != open) {
            if (open >= 0) {
                close(open);
            }
            if (states[slab] != GRANTED) {
                throw new ProtocolException("ring write into slab " + slab + ", which was not returned to the writer"
                        + " (" + stateName(states[slab]) + ')');
            }
            states[slab] = OPEN;
            granted--;
            open = slab;
            cursor = 0;
        }
        long aligned = Immediate.alignedLength(length);
        if (cursor + aligned > slabSize) {
            throw new ProtocolException("ring write of " + length + " bytes at offset " + cursor + " of slab " + slab
                    + " overruns the " + slabSize + "-byte slab");
        }
        lastOffset = slab * slabSize + cursor;
        cursor += aligned;
        outstanding[slab]++;
        if (Immediate.seal(immediate)) {
            close(slab);
        }
        return slab;
    }

    /** The lowest {@code max} bits of {@code mask}. */
    private static int lowest(int mask, int max) {
        int taken = 0;
        for (int m = mask; m != 0 && max > 0; m &= m - 1, max--) {
            taken |= m & -m;
        }
        return taken;
    }

    private void close(int slab) {
        states[slab] = CLOSED;
        closedMask |= 1 << slab;
        if (slab == open) {
            open = -1;
        }
    }

    /** Ring offset of the last write that arrived. */
    public long lastOffset() {
        return lastOffset;
    }

    /** Whether the writer is filling a slab it has not left: a SEND must not come before it does. */
    public boolean writing() {
        return open >= 0;
    }

    /** The slab the writer is filling, or -1. */
    public int openSlab() {
        return open;
    }

    /** The writer left the ring (it moved to another ring): the slab it was filling is closed. */
    public void writerLeft() {
        if (open >= 0) {
            close(open);
        }
    }

    /** Up to {@code max} of the slabs closed and not yet taken, bit k for slab k: invalidate their windows now. */
    public int takeClosed(int max) {
        int closed = lowest(closedMask, max);
        closedMask &= ~closed;
        for (int m = closed; m != 0; m &= m - 1) {
            states[Integer.numberOfTrailingZeros(m)] = INVALIDATING;
        }
        return closed;
    }

    /** Whether slabs wait for {@link #takeClosed}. */
    public boolean closedPending() {
        return closedMask != 0;
    }

    /** The window of {@code slab} is invalid (its LOCAL_INV completed): its writes may be delivered. */
    public void invalidated(int slab) {
        if (states[slab] != INVALIDATING) {
            throw new IllegalStateException("slab " + slab + " was not being invalidated: " + stateName(states[slab]));
        }
        states[slab] = INVALID;
        if (outstanding[slab] == 0) {
            unbound(slab);
        }
    }

    /**
     * The write that just {@linkplain #arrive arrived} and sealed {@code slab} came with a SEAL message whose
     * {@code SEND_WITH_INV} invalidated the slab's window as it arrived (the caller checked the rkey): its writes
     * may be delivered, with no invalidation of this side's.
     */
    public void invalidatedByPeer(int slab) {
        if (states[slab] != CLOSED || (closedMask & 1 << slab) == 0) {
            throw new IllegalStateException("slab " + slab + " was not just closed: " + stateName(states[slab]));
        }
        closedMask &= ~(1 << slab);
        states[slab] = INVALID;
        if (outstanding[slab] == 0) {
            unbound(slab);
        }
    }

    /** Whether the writes in {@code slab} may be handed to the reader: nobody can write there any more. */
    public boolean deliverable(int slab) {
        return states[slab] == INVALID;
    }

    /** A write in {@code slab} was released (copied out, or its buffer released by the reader). */
    public void release(int slab) {
        if (outstanding[slab] == 0) {
            throw new IllegalStateException("slab " + slab + " has no write outstanding");
        }
        if (--outstanding[slab] == 0 && states[slab] == INVALID) {
            unbound(slab);
        }
    }

    private void unbound(int slab) {
        states[slab] = UNBOUND;
        unboundMask |= 1 << slab;
    }

    /** Up to {@code max} of the slabs free to be bound again, bit k for slab k: bind their windows now. */
    public int takeUnbound(int max) {
        int unbound = lowest(unboundMask, max);
        unboundMask &= ~unbound;
        for (int m = unbound; m != 0; m &= m - 1) {
            int slab = Integer.numberOfTrailingZeros(m);
            states[slab] = BOUND;
            boundMask |= 1 << slab;
        }
        return unbound;
    }

    public boolean unboundPending() {
        return unboundMask != 0;
    }

    /**
     * The slabs bound again and not yet returned, bit k for slab k, to return in the next message header (their
     * binds are posted before it); they are the writer's again.
     */
    public int takeReturned() {
        int bound = boundMask;
        boundMask = 0;
        for (int m = bound; m != 0; m &= m - 1) {
            states[Integer.numberOfTrailingZeros(m)] = GRANTED;
            granted++;
        }
        return bound;
    }

    /** Slabs bound again and owed to the writer. */
    public int returnable() {
        return Integer.bitCount(boundMask);
    }

    /** Slabs the writer may write as far as this side knows (returned and not yet written). */
    public int granted() {
        return granted;
    }

    /** Nothing is outstanding: every slab is the writer's, or bound and owed to it. */
    public boolean quiet() {
        return granted + Integer.bitCount(boundMask) == count;
    }

    /** Whether some slab has an invalidation in flight. */
    public boolean invalidating() {
        for (byte s : states) {
            if (s == INVALIDATING) {
                return true;
            }
        }
        return false;
    }

    public byte state(int slab) {
        return states[slab];
    }

    public int outstanding(int slab) {
        return outstanding[slab];
    }

    public static String stateName(byte state) {
        return switch (state) {
            case GRANTED -> "granted";
            case OPEN -> "being written";
            case CLOSED -> "closed";
            case INVALIDATING -> "being invalidated";
            case INVALID -> "invalidated, held by the reader";
            case UNBOUND -> "released, to be bound again";
            case BOUND -> "bound again, not yet returned";
            default -> "unknown(" + state + ')';
        };
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("RingSlabs{").append(count).append(" x ").append(slabSize)
                .append(", open=").append(open).append(", granted=").append(granted).append(", states=");
        for (byte s : states) {
            b.append(s);
        }
        return b.append('}').toString();
    }
}
