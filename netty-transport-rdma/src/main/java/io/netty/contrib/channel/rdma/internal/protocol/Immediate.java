package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The 32-bit immediate of an RDMA WRITE WITH IMMEDIATE into the peer's receive ring. See docs/PROTOCOL.md.
 *
 * <p>Writes land in the ring one after the other, each at the next {@link #ALIGNMENT}-aligned offset; so the
 * immediate only has to say how much was written, whether the write skipped the ring's tail and landed at
 * offset 0 ({@link #WRAP}), and which of the receiver's rings it went to ({@link #GENERATION}: the receiver may
 * replace its ring, see {@link MessageHeader#TYPE_RING}). The skipped tail counts as consumed ring space.
 *
 * <pre>
 * bit 31     WRAP: this write starts at ring offset 0
 * bit 30     GENERATION: flips each time the writer switches to a new ring of the receiver
 * bits 0-29  length in bytes, 1 .. 2^30-1
 * </pre>
 *
 * <p>The value is given to and taken from the verbs in host order; the verbs layer converts it to and from the
 * network byte order of {@code ibv_send_wr.imm_data} / {@code ibv_wc.imm_data}.
 */
public final class Immediate {
    public static final int WRAP = 0x8000_0000;
    public static final int GENERATION = 0x4000_0000;
    public static final int LENGTH_MASK = 0x3FFF_FFFF;
    /** Ring offsets of writes are multiples of this. */
    public static final int ALIGNMENT = 64;

    private Immediate() {
    }

    public static int encode(int length, boolean wrap, boolean generation) {
        if (length <= 0 || length > LENGTH_MASK) {
            throw new IllegalArgumentException("length: " + length + " (expected: 1-" + LENGTH_MASK + ')');
        }
        return length | (wrap ? WRAP : 0) | (generation ? GENERATION : 0);
    }

    public static int length(int immediate) {
        return immediate & LENGTH_MASK;
    }

    public static boolean wrap(int immediate) {
        return (immediate & WRAP) != 0;
    }

    public static boolean generation(int immediate) {
        return (immediate & GENERATION) != 0;
    }

    /** Ring space a write of {@code length} bytes occupies. */
    public static long alignedLength(int length) {
        return ((long) length + ALIGNMENT - 1) & -ALIGNMENT;
    }

    public static String toString(int immediate) {
        return "Immediate{length=" + length(immediate) + ", wrap=" + wrap(immediate) + ", generation="
                + generation(immediate) + '}';
    }
}
