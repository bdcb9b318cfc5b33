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
            new MessageHeader().wrap(segment, 16).write(MessageHeader.TYPE_DATA, 65535, 1 << 30);
            MessageHeader header = new MessageHeader().wrap(segment, 16).validate(100);
            assertThat(header.type()).isEqualTo(MessageHeader.TYPE_DATA);
            assertThat(header.recvCredits()).isEqualTo(65535);
            assertThat(header.ringCredits()).isEqualTo(1 << 30);
            assertThat(header).hasToString("MessageHeader{type=DATA, flags=0, recvCredits=65535, ringCredits=1073741824}");
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
            header.write(MessageHeader.TYPE_RING, 0, 0).writeRing(0, 0, 0).validate(24);
            header.write(MessageHeader.TYPE_RING, 0, 0).writeRing(4096, 0, 0);
            assertThatThrownBy(() -> header.validate(24)).hasMessageContaining("announces a ring of 0 bytes at 0x1000");
            header.write(MessageHeader.TYPE_RING, 0, 0).writeRing(4096, 7, 1000);
            assertThatThrownBy(() -> header.validate(24)).hasMessageContaining("announces a ring of 1000 bytes");
            assertThatThrownBy(() -> header.write(MessageHeader.TYPE_DATA, 70000, 0))
                    .isInstanceOf(IllegalArgumentException.class);
        }
    }

    @Test
    void immediateEncodesLengthAndWrap() {
        int imm = Immediate.encode(12345, true, false);
        assertThat(Immediate.length(imm)).isEqualTo(12345);
        assertThat(Immediate.wrap(imm)).isTrue();
        assertThat(Immediate.wrap(Immediate.encode(Immediate.LENGTH_MASK, false, false))).isFalse();
        assertThat(Immediate.alignedLength(1)).isEqualTo(64);
        assertThat(Immediate.alignedLength(128)).isEqualTo(128);
        assertThatThrownBy(() -> Immediate.encode(0, false, false)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> Immediate.encode(Immediate.LENGTH_MASK + 1, false, false))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void immediateCarriesTheRingGeneration() {
        int imm = Immediate.encode(Immediate.LENGTH_MASK, true, true);
        assertThat(Immediate.length(imm)).isEqualTo(Immediate.LENGTH_MASK);
        assertThat(Immediate.wrap(imm)).isTrue();
        assertThat(Immediate.generation(imm)).isTrue();
        assertThat(Immediate.generation(Immediate.encode(5, true, false))).isFalse();
    }

    @Test
    void ringMessageAnnouncesANewRing() {
        MemorySegment segment = MemorySegment.ofArray(new byte[MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD]);
        MessageHeader header = new MessageHeader().wrap(segment, 0)
                .write(MessageHeader.TYPE_RING, 3, 0)
                .writeRing(0x7f00_1234_5000L, 0xCAFE, 4 << 20);
        header.validate(MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD);
        assertThat(header.ringAddress()).isEqualTo(0x7f00_1234_5000L);
        assertThat(header.ringRkey()).isEqualTo(0xCAFE);
        assertThat(header.ringSize()).isEqualTo(4 << 20);
        assertThat(header.recvCredits()).isEqualTo(3);
        assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH)).isInstanceOf(ProtocolException.class);
        header.writeRing(0x1000, 1, 100);
        assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("ring of 100 bytes");
        header.write(MessageHeader.TYPE_RING, 0, 64).writeRing(0x1000, 1, 4096);
        assertThatThrownBy(() -> header.validate(MessageHeader.LENGTH + MessageHeader.RING_PAYLOAD))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("ring credits");
    }
}
