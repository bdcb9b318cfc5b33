package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The 32-bit immediate of an RDMA WRITE WITH IMMEDIATE into the peer's receive ring. See docs/PROTOCOL.md §3.
 *
 * <p>The ring is cut into slabs, each writable through a memory window of its own. Writes fill one slab at a time
 * from its start, each at the next {@link #ALIGNMENT}-aligned offset; so the immediate only has to say which slab
 * the write went to, how much was written, whether the writer leaves the slab after it ({@link #SEAL}), and which
 * of the receiver's rings it went to ({@link #GENERATION}: the receiver may replace its ring, see
 * {@link MessageHeader#TYPE_RING}). A write into another slab than the one being filled also leaves that one.
 *
 * <pre>
 * bit 31     SEAL: the writer writes nothing more into this slab until it is returned
 * bit 30     GENERATION: flips each time the writer switches to a new ring of the receiver
 * bits 25-29 SLAB: the slab's index, 0 .. {@link #MAX_SLABS} - 1
 * bits 0-24  length in bytes, 1 .. 2^25-1
 * </pre>
 *
 * <p>The value is given to and taken from the verbs in host order; the verbs layer converts it to and from the
 * network byte order of {@code ibv_send_wr.imm_data} / {@code ibv_wc.imm_data}.
 */
public final class Immediate {
    public static final int SEAL = 0x8000_0000;
    public static final int GENERATION = 0x4000_0000;
    public static final int SLAB_SHIFT = 25;
    public static final int SLAB_MASK = 0x1F << SLAB_SHIFT;
    public static final int LENGTH_MASK = (1 << SLAB_SHIFT) - 1;
    /** Slabs of one ring, at most. */
    public static final int MAX_SLABS = 32;
    /** Offsets of writes within a slab are multiples of this. */
    public static final int ALIGNMENT = 64;

    private Immediate() {
    }

    public static int encode(int length, int slab, boolean seal, boolean generation) {
        if (length <= 0 || length > LENGTH_MASK) {
            throw new IllegalArgumentException("length: " + length + " (expected: 1-" + LENGTH_MASK + ')');
        }
        if (slab < 0 || slab >= MAX_SLABS) {
            throw new IllegalArgumentException("slab: " + slab + " (expected: 0-" + (MAX_SLABS - 1) + ')');
        }
        return length | slab << SLAB_SHIFT | (seal ? SEAL : 0) | (generation ? GENERATION : 0);
    }

    public static int length(int immediate) {
        return immediate & LENGTH_MASK;
    }

    public static int slab(int immediate) {
        return (immediate & SLAB_MASK) >>> SLAB_SHIFT;
    }

    public static boolean seal(int immediate) {
        return (immediate & SEAL) != 0;
    }

    public static boolean generation(int immediate) {
        return (immediate & GENERATION) != 0;
    }

    /** Slab space a write of {@code length} bytes occupies. */
    public static long alignedLength(int length) {
        return ((long) length + ALIGNMENT - 1) & -ALIGNMENT;
    }

    public static String toString(int immediate) {
        return "Immediate{length=" + length(immediate) + ", slab=" + slab(immediate) + ", seal=" + seal(immediate)
                + ", generation=" + generation(immediate) + '}';
    }
}
