package io.netty.contrib.channel.rdma.internal.protocol;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class MessageHeaderTest {
    @Test
    void writesAndReadsAtAnOffset() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(64);
            new MessageHeader().wrap(segment, 16).write(MessageHeader.TYPE_DATA, 65535, 0x8000_0005);
            MessageHeader header = new MessageHeader().wrap(segment, 16).validate(100);
            assertThat(header.type()).isEqualTo(MessageHeader.TYPE_DATA);
            assertThat(header.recvCredits()).isEqualTo(65535);
            assertThat(header.returnedSlabs()).isEqualTo(0x8000_0005);
            assertThat(header).hasToString("MessageHeader{type=DATA, flags=0, recvCredits=65535,"
                    + " returnedSlabs=0x80000005}");
        }
    }

    @Test
    void rejectsMalformedMessages() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD);
            MessageHeader header = new MessageHeader().wrap(segment, 0);
            assertThatThrownBy(() -> header.validate(3)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("shorter than its 8-byte header");
            segment.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) 9);
            assertThatThrownBy(() -> header.validate(8)).hasMessage("unknown message type 9");
            header.write(MessageHeader.TYPE_CREDIT, 1, 0);
            assertThatThrownBy(() -> header.validate(12)).hasMessage("message of type CREDIT carries 4 payload bytes");
            header.write(MessageHeader.TYPE_SHUTDOWN, 0, 0);
            segment.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 1, (byte) 1);
            assertThatThrownBy(() -> header.validate(8))
                    .hasMessage("message header of type SHUTDOWN has unknown flags 1");
            header.write(MessageHeader.TYPE_CREDIT, MessageHeader.FLAG_RING_SEEN, 0, 0).validate(8);
            header.write(MessageHeader.TYPE_DATA, MessageHeader.FLAG_WANTS_RING | MessageHeader.FLAG_RING_SEEN, 0, 0)
                    .validate(9);
            segment.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 1, (byte) 4);
            assertThatThrownBy(() -> header.validate(9))
                    .hasMessage("message header of type DATA has unknown flags 4");
            header.write(MessageHeader.TYPE_RING, 0, 0).writeRing(0, 0, null, 0, 0);
            header.validate(24);
            header.write(MessageHeader.TYPE_RING, 0, 0).writeRing(4096, 0, null, 0, 0);
            assertThatThrownBy(() -> header.validate(24))
                    .hasMessageContaining("announces a ring of 0 bytes in 0 slabs at 0x1000");
            header.write(MessageHeader.TYPE_RING, 0, 0).writeRing(4096, 1000, new int[] {7}, 1, 0);
            assertThatThrownBy(() -> header.validate(28)).hasMessageContaining("announces a ring of 1000 bytes");
            assertThatThrownBy(() -> header.validate(24)).hasMessageContaining("RING message of 24 bytes for 1 slabs");
            assertThatThrownBy(() -> header.write(MessageHeader.TYPE_DATA, 70000, 0))
                    .isInstanceOf(IllegalArgumentException.class);
        }
    }

    @Test
    void sealMessageCarriesTheImmediateOfTheWriteItSeals() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment segment = arena.allocate(MessageHeader.LENGTH + MessageHeader.SEAL_PAYLOAD);
            MessageHeader header = new MessageHeader().wrap(segment, 0);
            int sealed = Immediate.encode(5000, 3, true, true);
            header.write(MessageHeader.TYPE_SEAL, 0, 0).writeSeal(sealed).validate(12);
            assertThat(header.sealImmediate()).isEqualTo(sealed);
            assertThat(MessageHeader.typeName(header.type())).isEqualTo("SEAL");
            assertThatThrownBy(() -> header.validate(8)).hasMessage("SEAL message of 8 bytes (expected: 12)");
            header.writeSeal(Immediate.encode(5000, 3, false, true));
            assertThatThrownBy(() -> header.validate(12)).hasMessageContaining("which does not seal its slab");
            header.write(MessageHeader.TYPE_SEAL, 1, 0).writeSeal(sealed);
            assertThatThrownBy(() -> header.validate(12))
                    .hasMessage("SEAL message with flags, credits or slabs (expected: none)");
            header.write(MessageHeader.TYPE_SEAL, MessageHeader.FLAG_RING_SEEN, 0, 0);
            assertThatThrownBy(() -> header.validate(12))
                    .hasMessage("SEAL message with flags, credits or slabs (expected: none)");
        }
    }

    @Test
    void immediateEncodesLengthSlabAndSeal() {
        int imm = Immediate.encode(12345, 17, true, false);
        assertThat(Immediate.length(imm)).isEqualTo(12345);
        assertThat(Immediate.slab(imm)).isEqualTo(17);
        assertThat(Immediate.seal(imm)).isTrue();
        assertThat(Immediate.generation(imm)).isFalse();
        int max = Immediate.encode(Immediate.LENGTH_MASK, Immediate.MAX_SLABS - 1, false, true);
        assertThat(Immediate.length(max)).isEqualTo(Immediate.LENGTH_MASK);
        assertThat(Immediate.slab(max)).isEqualTo(31);
        assertThat(Immediate.seal(max)).isFalse();
        assertThat(Immediate.generation(max)).isTrue();
        assertThat(Immediate.alignedLength(1)).isEqualTo(64);
        assertThat(Immediate.alignedLength(128)).isEqualTo(128);
        assertThatThrownBy(() -> Immediate.encode(0, 0, false, false)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Immediate.encode(Immediate.LENGTH_MASK + 1, 0, false, false))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Immediate.encode(1, 32, false, false)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void ringMessageAnnouncesANewRingWithARkeyPerSlab() {
        MemorySegment segment = MemorySegment.ofArray(new byte[MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD]);
        int[] rkeys = {0xCAFE00, 0xBEEF01, 0x123402, 0x567803};
        MessageHeader header = new MessageHeader().wrap(segment, 0).write(MessageHeader.TYPE_RING, 3, 0);
        int payload = header.writeRing(0x7f00_1234_5000L, 4 << 20, rkeys, 4, 0);
        assertThat(payload).isEqualTo(32);
        header.validate(MessageHeader.LENGTH + payload);
        assertThat(header.ringAddress()).isEqualTo(0x7f00_1234_5000L);
        assertThat(header.ringSize()).isEqualTo(4 << 20);
        assertThat(header.ringSlabs()).isEqualTo(4);
        assertThat(header.ringFlags()).isZero();
        for (int k = 0; k < 4; k++) {
            assertThat(header.ringRkey(k)).isEqualTo(rkeys[k]);
        }
        assertThat(header.recvCredits()).isEqualTo(3);
        assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH)).isInstanceOf(ProtocolException.class);
        header.write(MessageHeader.TYPE_RING, 0, 1).writeRing(0x1000, 4096, rkeys, 1, 0);
        assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH + 20))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("returns slabs");
    }
}
