package io.netty.contrib.channel.rdma.internal.protocol;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link SendWindow} and {@link RingSlabs} against each other, as the two ends of one connection use them. */
class CreditsTest {
    private static final int[] RKEYS = {0x1100, 0x2200, 0x3300, 0x44ff};

    @Test
    void lastReceiveCreditIsReservedForCreditMessages() {
        SendWindow window = new SendWindow(3);
        assertThat(window.tryAcquireMessage()).isTrue();
        assertThat(window.tryAcquireMessage()).isTrue();
        assertThat(window.tryAcquireMessage()).isFalse();
        assertThat(window.tryAcquireCreditMessage()).isTrue();
        assertThat(window.tryAcquireCreditMessage()).isFalse();
        window.grant(2, 0);
        assertThat(window.tryAcquireMessage()).isTrue();
    }

    /** ringRoom says beforehand what tryReserveRing will find: room in the open slab, or a returned slab. */
    @Test
    void ringRoomForetellsTheReservation() {
        SendWindow writer = new SendWindow(16);
        assertThat(writer.ringRoom()).as("no ring").isZero();
        writer.switchRing(2048, 2, RKEYS, false);
        assertThat(writer.ringRoom()).as("a returned slab").isEqualTo(1024);
        assertThat(writer.tryReserveRing(1000)).isZero();
        // Slab 0 full (1000 took 1024), slab 1 still returned: a whole slab fits.
        assertThat(writer.ringRoom()).isEqualTo(1024);
        assertThat(writer.tryReserveRing(1024)).isEqualTo(1024);
        // Slab 1 full, none returned: nothing fits; a seal changes nothing until the peer returns a slab.
        assertThat(writer.ringRoom()).isZero();
        assertThat(writer.tryReserveRing(1)).isEqualTo(-1);
        writer.seal();
        assertThat(writer.ringRoom()).isZero();
        writer.grant(0, 0b01);
        assertThat(writer.ringRoom()).isEqualTo(1024);
        assertThat(writer.tryReserveRing(100)).isZero();
        // Slab 0 open with 896 bytes left (100 took 128), no slab returned: 896 fit, 1000 do not.
        assertThat(writer.ringRoom()).isEqualTo(896);
        assertThat(writer.tryReserveRing(1000)).isEqualTo(-1);
        assertThat(writer.tryReserveRing(896)).isEqualTo(128);
        assertThat(writer.ringRoom()).isZero();
    }

    /** What the writer posts: the immediate of its last reservation. */
    private static int immediate(SendWindow writer, int length, boolean seal) {
        return Immediate.encode(length, writer.lastSlab(), seal, false);
    }

    @Test
    void aSlabInvalidatedByTheWritersSealIsDeliverableAtOnce() {
        SendWindow writer = new SendWindow(16);
        writer.switchRing(4096, 4, RKEYS, false);
        RingSlabs reader = new RingSlabs(4, 1024);
        writer.tryReserveRing(600);
        reader.arrive(immediate(writer, 600, false));
        assertThatThrownBy(() -> reader.invalidatedByPeer(0)).as("the writer has not left it")
                .isInstanceOf(IllegalStateException.class);
        writer.tryReserveRing(100);
        assertThat(reader.arrive(immediate(writer, 100, true))).isZero();
        writer.seal();
        reader.invalidatedByPeer(0);
        assertThat(reader.deliverable(0)).isTrue();
        assertThat(reader.closedPending()).as("nothing left to invalidate").isFalse();
        assertThat(reader.invalidating()).isFalse();
        reader.release(0);
        reader.release(0);
        assertThat(reader.takeUnbound(8)).isEqualTo(0b1);
        assertThat(reader.takeReturned()).isEqualTo(0b1);
    }

    @Test
    void slabsGoRoundAndComeBackUnderTheNextRkey() {
        SendWindow writer = new SendWindow(16);
        writer.switchRing(4096, 4, RKEYS, false);
        RingSlabs reader = new RingSlabs(4, 1024);
        assertThat(writer.maxRingWrite()).isEqualTo(1024);

        assertThat(writer.tryReserveRing(600)).isZero();
        assertThat(writer.lastRkey()).isEqualTo(0x1100);
        assertThat(reader.arrive(immediate(writer, 600, false))).isZero();
        assertThat(reader.lastOffset()).isZero();
        assertThat(writer.tryReserveRing(300)).isEqualTo(640);
        reader.arrive(immediate(writer, 300, false));
        assertThat(reader.lastOffset()).isEqualTo(640);
        assertThat(reader.writing()).as("the writer has not left slab 0").isTrue();
        assertThat(reader.closedPending()).isFalse();

        // 64 bytes left in slab 0: the next write starts slab 1, which leaves slab 0.
        assertThat(writer.tryReserveRing(100)).isEqualTo(1024);
        assertThat(writer.lastRkey()).isEqualTo(0x2200);
        assertThat(reader.arrive(immediate(writer, 100, true))).isEqualTo(1);
        assertThat(writer.seal()).isTrue();
        assertThat(reader.writing()).isFalse();
        assertThat(reader.deliverable(0)).as("not before its window is invalidated").isFalse();
        assertThat(reader.takeClosed(8)).isEqualTo(0b11);
        assertThat(reader.state(0)).isEqualTo(RingSlabs.INVALIDATING);
        reader.invalidated(0);
        reader.invalidated(1);
        assertThat(reader.deliverable(0)).isTrue();
        assertThat(reader.deliverable(1)).isTrue();

        // The reader holds slab 0's first write; slab 1 is released and comes back first.
        reader.release(1);
        assertThat(reader.takeUnbound(8)).isEqualTo(0b10);
        assertThat(reader.returnable()).isEqualTo(1);
        int returned = reader.takeReturned();
        assertThat(returned).isEqualTo(0b10);
        writer.grant(0, returned);
        assertThat(writer.grantedSlabs()).as("slabs 2, 3 and 1 again").isEqualTo(3);
        // The slab returned last is written first (its bytes are the likeliest to be in the caches), then the
        // others in the order they were given.
        assertThat(writer.tryReserveRing(1024)).isEqualTo(1024);
        assertThat(writer.lastRkey()).as("slab 1 bound again under the next key").isEqualTo(0x2201);
        reader.arrive(immediate(writer, 1024, false));
        assertThat(writer.tryReserveRing(1024)).isEqualTo(2048);
        reader.arrive(immediate(writer, 1024, false));
        assertThat(writer.tryReserveRing(64)).isEqualTo(3072);
        reader.arrive(immediate(writer, 64, true));
        writer.seal();
        assertThat(writer.tryReserveRing(64)).as("slab 0 is still held").isEqualTo(-1);

        reader.release(0);
        assertThat(reader.takeUnbound(8)).as("one write of slab 0 is still held").isZero();
        reader.release(0);
        assertThat(reader.takeUnbound(8)).isEqualTo(0b01);
        writer.grant(0, reader.takeReturned());
        assertThat(writer.tryReserveRing(64)).isZero();
        assertThat(writer.lastRkey()).isEqualTo(0x1101);
    }

    @Test
    void rkeysWrapInTheirEightBitKey() {
        assertThat(SendWindow.nextRkey(0x44ff)).isEqualTo(0x4400);
        assertThat(SendWindow.nextRkey(0x1234_5601)).isEqualTo(0x1234_5602);
        SendWindow writer = new SendWindow(4);
        writer.switchRing(4096, 4, RKEYS, true);
        writer.tryReserveRing(64);
        writer.seal();
        writer.grant(0, 1);
        int slab0Rkey = -1;
        for (int k = 0; k < 4; k++) {
            writer.tryReserveRing(64);
            if (writer.lastSlab() == 0) {
                slab0Rkey = writer.lastRkey();
            }
            writer.seal();
        }
        assertThat(slab0Rkey).as("fixed rkeys: a region's, never changed").isEqualTo(0x1100);
    }

    @Test
    void switchingToANewRingGivesEverySlab() {
        SendWindow writer = new SendWindow(16);
        writer.switchRing(2048, 2, RKEYS, false);
        assertThat(writer.tryReserveRing(1000)).isZero();
        assertThat(writer.tryReserveRing(1000)).isEqualTo(1024);
        assertThat(writer.tryReserveRing(64)).isEqualTo(-1);
        writer.switchRing(4096, 4, RKEYS, false);
        assertThat(writer.ringSize()).isEqualTo(4096);
        assertThat(writer.grantedSlabs()).isEqualTo(4);
        assertThat(writer.tryReserveRing(64)).isZero();
        writer.switchRing(0, 0, RKEYS, false);
        assertThat(writer.maxRingWrite()).isZero();
        assertThatThrownBy(() -> writer.switchRing(100, 3, RKEYS, false)).isInstanceOf(ProtocolException.class);
        assertThatThrownBy(() -> writer.switchRing(4096, 0, RKEYS, false)).isInstanceOf(ProtocolException.class);
    }

    @Test
    void randomTrafficNeverOverlapsHeldWritesAndReturnsEverything() {
        Random random = new Random(42);
        int slabs = 8;
        long slabSize = 16 * 1024;
        SendWindow writer = new SendWindow(64);
        writer.switchRing(slabs * slabSize, slabs, new int[] {0, 0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 0x700},
                false);
        RingSlabs reader = new RingSlabs(slabs, slabSize);
        List<long[]> delivered = new ArrayList<>(); // {slab, offset, aligned}
        List<long[]> queued = new ArrayList<>();
        int[] readerRkeys = {0, 0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 0x700};
        for (int i = 0; i < 200_000; i++) {
            int action = random.nextInt(10);
            if (action < 5) {
                int length = 1 + random.nextInt(8192);
                if (writer.tryAcquireMessage()) {
                    long offset = writer.tryReserveRing(length);
                    if (offset < 0) {
                        writer.releaseUnused();
                    } else {
                        int slab = writer.lastSlab();
                        assertThat(writer.lastRkey()).isEqualTo(readerRkeys[slab]);
                        boolean seal = random.nextInt(4) == 0;
                        reader.arrive(Immediate.encode(length, slab, seal, false));
                        if (seal) {
                            writer.seal();
                        }
                        assertThat(reader.lastOffset()).isEqualTo(offset);
                        long aligned = Immediate.alignedLength(length);
                        for (long[] h : delivered) {
                            assertThat(offset + aligned <= h[1] || h[1] + h[2] <= offset)
                                    .as("write at %d overlaps a held one at %d", offset, h[1]).isTrue();
                        }
                        queued.add(new long[] {slab, offset, aligned});
                    }
                }
            } else if (action < 7) {
                // The reader invalidates what was closed, then delivers what became deliverable, in order.
                for (int m = reader.takeClosed(random.nextInt(4)); m != 0; m &= m - 1) {
                    reader.invalidated(Integer.numberOfTrailingZeros(m));
                }
                while (!queued.isEmpty() && reader.deliverable((int) queued.get(0)[0])) {
                    delivered.add(queued.remove(0));
                    writer.grant(1, 0);
                }
            } else if (!delivered.isEmpty()) {
                Collections.shuffle(delivered, random);
                reader.release((int) delivered.remove(delivered.size() - 1)[0]);
                for (int m = reader.takeUnbound(random.nextInt(4)); m != 0; m &= m - 1) {
                    int slab = Integer.numberOfTrailingZeros(m);
                    readerRkeys[slab] = SendWindow.nextRkey(readerRkeys[slab]);
                }
                writer.grant(0, reader.takeReturned());
            }
        }
        // The writer leaves its slab; everything is delivered, released and returned.
        if (writer.seal()) {
            reader.writerLeft();
        }
        while (!queued.isEmpty()) {
            for (int m = reader.takeClosed(32); m != 0; m &= m - 1) {
                reader.invalidated(Integer.numberOfTrailingZeros(m));
            }
            assertThat(reader.deliverable((int) queued.get(0)[0])).isTrue();
            delivered.add(queued.remove(0));
            writer.grant(1, 0);
        }
        for (long[] h : delivered) {
            reader.release((int) h[0]);
        }
        reader.takeUnbound(32);
        writer.grant(0, reader.takeReturned());
        assertThat(reader.quiet()).isTrue();
        assertThat(writer.grantedSlabs()).isEqualTo(slabs);
        assertThat(writer.recvCredits()).isEqualTo(64);
    }

    @Test
    void hostileWritesAreProtocolErrors() {
        RingSlabs reader = new RingSlabs(2, 1024);
        assertThatThrownBy(() -> reader.arrive(Immediate.encode(2000, 0, false, false)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("overruns the 1024-byte slab");
        assertThatThrownBy(() -> reader.arrive(Immediate.encode(10, 5, false, false)))
                .hasMessageContaining("slab 5 of a ring of 2 slabs");
        assertThatThrownBy(() -> new RingSlabs(2, 1024).arrive(0)).hasMessageContaining("length 0");
        RingSlabs other = new RingSlabs(2, 1024);
        other.arrive(Immediate.encode(10, 0, true, false));
        // Slab 0 was left (SEAL): writing it again before it is returned is a violation, at any stage.
        assertThatThrownBy(() -> other.arrive(Immediate.encode(10, 0, false, false)))
                .hasMessageContaining("slab 0, which was not returned to the writer (closed)");
        other.takeClosed(2);
        other.invalidated(0);
        assertThatThrownBy(() -> other.arrive(Immediate.encode(10, 0, false, false)))
                .hasMessageContaining("(invalidated, held by the reader)");
        other.release(0);
        other.takeUnbound(2);
        assertThatThrownBy(() -> other.arrive(Immediate.encode(10, 0, false, false)))
                .hasMessageContaining("(bound again, not yet returned)");
        assertThat(other.takeReturned()).isEqualTo(1);
        other.arrive(Immediate.encode(10, 0, false, false));
        assertThatThrownBy(() -> other.release(1)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> other.invalidated(0)).isInstanceOf(IllegalStateException.class);

        SendWindow writer = new SendWindow(2);
        writer.switchRing(2048, 2, RKEYS, false);
        assertThatThrownBy(() -> writer.grant(0, 1)).as("slab 0 is the writer's already")
                .isInstanceOf(ProtocolException.class).hasMessageContaining("which the writer has");
        assertThatThrownBy(() -> writer.grant(0, 4)).hasMessageContaining("of a ring of 2 slabs");
    }

    @Test
    void receiveWindowEnforcesItsGrantAndRaisesItForABusyPeer() {
        ReceiveWindow window = new ReceiveWindow(4, 16);
        for (int i = 0; i < 4; i++) {
            window.consumed();
        }
        assertThatThrownBy(window::consumed).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("beyond the 4 receive credits");
        assertThat(window.limit()).isEqualTo(4);
        // This side freed what came while the peer was at its reserve: the grant doubles.
        assertThat(window.freed(100)).isEqualTo(4);
        assertThat(window.limit()).isEqualTo(8);
        assertThat(window.owed()).isEqualTo(5);
        assertThat(window.due()).isTrue();
        assertThat(window.take()).isEqualTo(5);
        assertThat(window.outstanding()).isEqualTo(5);
        assertThat(window.freed(100)).as("the peer is no longer at its reserve").isZero();
        assertThat(window.limit()).isEqualTo(8);
    }

    @Test
    void aRaiseTakesOnlyTheRoomTheSharedQueueHas() {
        ReceiveWindow window = new ReceiveWindow(2, 64);
        window.consumed();
        window.consumed();
        assertThat(window.freed(0)).as("no room: no raise").isZero();
        assertThat(window.limit()).isEqualTo(2);
        assertThat(window.freed(1)).isEqualTo(1);
        assertThat(window.limit()).isEqualTo(3);
        assertThat(window.owed()).isEqualTo(3);
    }
}
