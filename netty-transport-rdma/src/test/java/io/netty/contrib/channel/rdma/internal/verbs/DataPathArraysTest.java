package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.Test;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemorySegment;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The data-path arrays write and read their structs at absolute addresses, each member with the width and byte order
 * its accessor chooses: checked here against the struct layouts themselves (whose offsets and sizes {@link
 * StructLayoutTest} checks against the C headers), with values that fill every byte of a member.
 */
class DataPathArraysTest {
    private static Object member(GroupLayout layout, long structAddress, String dotted) {
        MemorySegment struct = MemorySegment.ofAddress(structAddress).reinterpret(layout.byteSize());
        return Layouts.field(layout, dotted).get(struct, 0L);
    }

    @Test
    void sendWorkRequestMembersHaveTheirLayoutsWidthAndOrder() {
        try (SendWorkRequests wrs = new SendWorkRequests(4, 3)) {
            wrs.set(2, 0x1122_3344_5566_7788L, IbvWrOpcode.RDMA_WRITE_WITH_IMM, IbvSendFlags.SIGNALED)
                    .immData(2, 0x0A0B_0C0D)
                    .rdma(2, 0x0102_0304_0506_0708L, 0x7654_3210)
                    .sgeAddress(2, 1, 0x00FF_EEDD_CCBB_AA99L, 0x4000_0001, 0x1357_9BDF);
            long wr = wrs.base + 2 * IbvSendWr.SIZE;
            assertThat(member(IbvSendWr.LAYOUT, wr, "wr_id")).isEqualTo(0x1122_3344_5566_7788L);
            assertThat(member(IbvSendWr.LAYOUT, wr, "opcode")).isEqualTo(IbvWrOpcode.RDMA_WRITE_WITH_IMM);
            assertThat(member(IbvSendWr.LAYOUT, wr, "send_flags")).isEqualTo(IbvSendFlags.SIGNALED);
            assertThat(member(IbvSendWr.LAYOUT, wr, "imm_data")).isEqualTo(0x0A0B_0C0D);
            assertThat(member(IbvSendWr.LAYOUT, wr, "wr.rdma.remote_addr")).isEqualTo(0x0102_0304_0506_0708L);
            assertThat(member(IbvSendWr.LAYOUT, wr, "wr.rdma.rkey")).isEqualTo(0x7654_3210);
            assertThat(member(IbvSendWr.LAYOUT, wr, "num_sge")).isEqualTo(2);
            assertThat(wrs.wrId(2)).isEqualTo(0x1122_3344_5566_7788L);
            assertThat(wrs.numSge(2)).isEqualTo(2);
            long sge = (long) member(IbvSendWr.LAYOUT, wr, "sg_list") + IbvSge.SIZE;
            assertThat(member(IbvSge.LAYOUT, sge, "addr")).isEqualTo(0x00FF_EEDD_CCBB_AA99L);
            assertThat(member(IbvSge.LAYOUT, sge, "length")).isEqualTo(0x4000_0001);
            assertThat(member(IbvSge.LAYOUT, sge, "lkey")).isEqualTo(0x1357_9BDF);
            // the other requests are untouched
            assertThat(member(IbvSendWr.LAYOUT, wrs.base + IbvSendWr.SIZE, "wr_id")).isEqualTo(0L);
            assertThat(member(IbvSendWr.LAYOUT, wrs.base + 3 * IbvSendWr.SIZE, "num_sge")).isEqualTo(0);
        }
    }

    @Test
    void recvWorkRequestMembersHaveTheirLayoutsWidthAndOrder() {
        try (RecvWorkRequests wrs = new RecvWorkRequests(3, 1)) {
            wrs.setAddress(1, 0x0102_0304_0506_0708L, 0x7766_5544_3322_1100L, 0x0800_0001, 0x2468_ACE0);
            long wr = wrs.base + IbvRecvWr.SIZE;
            assertThat(member(IbvRecvWr.LAYOUT, wr, "wr_id")).isEqualTo(0x0102_0304_0506_0708L);
            assertThat(member(IbvRecvWr.LAYOUT, wr, "num_sge")).isEqualTo(1);
            long sge = (long) member(IbvRecvWr.LAYOUT, wr, "sg_list");
            assertThat(member(IbvSge.LAYOUT, sge, "addr")).isEqualTo(0x7766_5544_3322_1100L);
            assertThat(member(IbvSge.LAYOUT, sge, "length")).isEqualTo(0x0800_0001);
            assertThat(member(IbvSge.LAYOUT, sge, "lkey")).isEqualTo(0x2468_ACE0);
            assertThat(wrs.wrId(1)).isEqualTo(0x0102_0304_0506_0708L);
        }
    }

    @Test
    void workCompletionMembersHaveTheirLayoutsWidthAndOrder() {
        try (WorkCompletions wcs = new WorkCompletions(2)) {
            MemorySegment wc = MemorySegment.ofAddress(wcs.base + IbvWc.SIZE).reinterpret(IbvWc.LAYOUT.byteSize());
            Layouts.field(IbvWc.LAYOUT, "wr_id").set(wc, 0L, 0x1020_3040_5060_7080L);
            Layouts.field(IbvWc.LAYOUT, "status").set(wc, 0L, 0x0000_0105);
            Layouts.field(IbvWc.LAYOUT, "opcode").set(wc, 0L, 0x0001_0080);
            Layouts.field(IbvWc.LAYOUT, "vendor_err").set(wc, 0L, 0x0A0B_0C0D);
            Layouts.field(IbvWc.LAYOUT, "byte_len").set(wc, 0L, 0x0004_0001);
            Layouts.field(IbvWc.LAYOUT, "imm_data").set(wc, 0L, 0x7172_7374);
            Layouts.field(IbvWc.LAYOUT, "qp_num").set(wc, 0L, 0x00AB_CDEF);
            Layouts.field(IbvWc.LAYOUT, "src_qp").set(wc, 0L, 0x0012_3456);
            Layouts.field(IbvWc.LAYOUT, "wc_flags").set(wc, 0L, 0x0000_000A);
            assertThat(wcs.wrId(1)).isEqualTo(0x1020_3040_5060_7080L);
            assertThat(wcs.status(1)).isEqualTo(0x0000_0105);
            assertThat(wcs.opcode(1)).isEqualTo(0x0001_0080);
            assertThat(wcs.vendorErr(1)).isEqualTo(0x0A0B_0C0D);
            assertThat(wcs.byteLen(1)).isEqualTo(0x0004_0001);
            assertThat(wcs.immData(1)).isEqualTo(0x7172_7374);
            assertThat(wcs.qpNum(1)).isEqualTo(0x00AB_CDEF);
            assertThat(wcs.srcQp(1)).isEqualTo(0x0012_3456);
            assertThat(wcs.hasImm(1)).isTrue();
            assertThat(wcs.hasInv(1)).isTrue();
            Layouts.field(IbvWc.LAYOUT, "invalidated_rkey").set(wc, 0L, 0x5566_7788);
            assertThat(wcs.invalidatedRkey(1)).isEqualTo(0x5566_7788);
        }
    }

    @Test
    void anIndexOutOfRangeOrAClosedArrayIsRefusedNotAccessed() {
        SendWorkRequests wrs = new SendWorkRequests(2, 1);
        assertThatThrownBy(() -> wrs.set(2, 1, IbvWrOpcode.SEND, 0)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> wrs.sgeAddress(0, 1, 4096, 8, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        wrs.close();
        assertThatThrownBy(() -> wrs.set(0, 1, IbvWrOpcode.SEND, 0)).isInstanceOf(IllegalStateException.class);
        WorkCompletions wcs = new WorkCompletions(1);
        assertThatThrownBy(() -> wcs.wrId(-1)).isInstanceOf(IndexOutOfBoundsException.class);
        wcs.close();
        assertThatThrownBy(() -> wcs.status(0)).isInstanceOf(IllegalStateException.class);
        RecvWorkRequests rwrs = new RecvWorkRequests(1, 1);
        rwrs.close();
        assertThatThrownBy(() -> rwrs.setAddress(0, 1, 4096, 8, 1)).isInstanceOf(IllegalStateException.class);
    }
}
