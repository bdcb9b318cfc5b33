package io.netty.contrib.channel.rdma.internal.protocol;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link SendWindow} and {@link RingReleases} against each other, as the two ends of one connection use them. */
class CreditsTest {
    @Test
    void lastReceiveCreditIsReservedForCreditMessages() {
        SendWindow window = new SendWindow(3, 0);
        assertThat(window.tryAcquireMessage()).isTrue();
        assertThat(window.tryAcquireMessage()).isTrue();
        assertThat(window.tryAcquireMessage()).isFalse();
        assertThat(window.tryAcquireCreditMessage()).isTrue();
        assertThat(window.tryAcquireCreditMessage()).isFalse();
        window.grant(2, 0);
        assertThat(window.tryAcquireMessage()).isTrue();
    }

    @Test
    void ringWritesWrapAndSpaceReturnsInOrderOnly() {
        SendWindow writer = new SendWindow(16, 1024);
        RingReleases reader = new RingReleases(1024, 16);

        assertThat(writer.tryReserveRing(600)).isEqualTo(0);
        long first = reader.arrive(Immediate.encode(600, writer.lastWrapped(), false));
        assertThat(reader.lastOffset()).isZero();

        assertThat(writer.tryReserveRing(300)).isEqualTo(640);
        long second = reader.arrive(Immediate.encode(300, writer.lastWrapped(), false));
        assertThat(reader.lastOffset()).isEqualTo(640);

        // 64 bytes are left at the tail, the rest is in use: no room for 100 bytes.
        assertThat(writer.tryReserveRing(100)).isEqualTo(-1);

        assertThat(reader.pinned()).isEqualTo(640 + 320);
        reader.release(second);
        assertThat(reader.takeOwed()).as("second cannot be returned before first").isZero();
        assertThat(reader.pinned()).as("the held first write pins the released second").isEqualTo(640 + 320);
        reader.release(first);
        long owed = reader.takeOwed();
        assertThat(owed).isEqualTo(640 + 320);
        assertThat(reader.pinned()).isZero();
        writer.grant(0, owed);

        assertThat(writer.tryReserveRing(100)).isEqualTo(0);
        assertThat(writer.lastWrapped()).isTrue();
        long third = reader.arrive(Immediate.encode(100, true, false));
        assertThat(reader.lastOffset()).isZero();
        reader.release(third);
        assertThat(reader.takeOwed()).as("the skipped tail comes back with the write").isEqualTo(64 + 128);
    }

    @Test
    void switchingToANewRingStartsItEmpty() {
        SendWindow writer = new SendWindow(16, 1024);
        assertThat(writer.tryReserveRing(1000)).isZero();
        assertThat(writer.tryReserveRing(64)).isEqualTo(-1);
        writer.switchRing(2048);
        assertThat(writer.ringSize()).isEqualTo(2048);
        assertThat(writer.ringFree()).isEqualTo(2048);
        assertThat(writer.tryReserveRing(64)).isZero();
        assertThat(writer.lastWrapped()).isFalse();
        assertThatThrownBy(() -> writer.switchRing(100)).isInstanceOf(ProtocolException.class);
    }

    @Test
    void randomTrafficNeverOverlapsAndReturnsEverything() {
        Random random = new Random(42);
        long ringSize = 64 * 1024;
        SendWindow writer = new SendWindow(64, ringSize);
        RingReleases reader = new RingReleases(ringSize, 64);
        List<long[]> held = new ArrayList<>(); // {sequence, offset, aligned}
        for (int i = 0; i < 100_000; i++) {
            if (random.nextInt(3) > 0) {
                int length = 1 + random.nextInt(8192);
                if (writer.tryAcquireMessage()) {
                    long offset = writer.tryReserveRing(length);
                    if (offset < 0) {
                        writer.releaseUnused();
                    } else {
                        long seq = reader.arrive(Immediate.encode(length, writer.lastWrapped(), false));
                        assertThat(reader.lastOffset()).isEqualTo(offset);
                        long aligned = Immediate.alignedLength(length);
                        for (long[] h : held) {
                            assertThat(offset + aligned <= h[1] || h[1] + h[2] <= offset)
                                    .as("write at %d overlaps a held one at %d", offset, h[1]).isTrue();
                        }
                        held.add(new long[] {seq, offset, aligned});
                    }
                }
            } else if (!held.isEmpty()) {
                Collections.shuffle(held, random);
                reader.release(held.remove(held.size() - 1)[0]);
                writer.grant(1, reader.takeOwed());
            }
        }
        for (long[] h : held) {
            reader.release(h[0]);
        }
        writer.grant(held.size(), reader.takeOwed());
        assertThat(writer.ringFree()).isEqualTo(ringSize);
        assertThat(writer.recvCredits()).isEqualTo(64);
        assertThat(reader.outstanding()).isZero();
    }

    @Test
    void hostileWritesAreProtocolErrors() {
        RingReleases reader = new RingReleases(1024, 2);
        assertThatThrownBy(() -> reader.arrive(2000)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("overruns the 1024-byte ring");
        // Room for 2 outstanding writes grows while a reader holds more, up to what the ring can hold: 1024 / 64.
        for (int i = 0; i < 16; i++) {
            reader.arrive(10);
        }
        assertThatThrownBy(() -> reader.arrive(10)).hasMessageContaining("more than 16 ring writes outstanding");
        assertThatThrownBy(() -> reader.release(99)).isInstanceOf(IllegalStateException.class);
        SendWindow writer = new SendWindow(2, 1024);
        assertThatThrownBy(() -> writer.grant(0, 64)).isInstanceOf(ProtocolException.class);
    }

    @Test
    void aWrapOntoSpaceStillHeldIsAProtocolError() {
        RingReleases reader = new RingReleases(1024, 4);
        long first = reader.arrive(Immediate.encode(512, false, false));
        reader.arrive(Immediate.encode(256, false, false));
        // 768 bytes held: a write of 512 that wraps to offset 0 would land on the first, still unreleased.
        assertThatThrownBy(() -> reader.arrive(Immediate.encode(512, true, false)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("not yet released");
        reader.release(first);
        // Released but not yet returned to the writer: still not the writer's to use.
        assertThatThrownBy(() -> reader.arrive(Immediate.encode(512, true, false)))
                .hasMessageContaining("not yet returned");
        assertThat(reader.takeOwed()).isEqualTo(512);
        reader.arrive(Immediate.encode(512, true, false));
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
