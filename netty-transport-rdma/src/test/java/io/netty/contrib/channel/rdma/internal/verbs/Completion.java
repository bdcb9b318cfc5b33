package io.netty.contrib.channel.rdma.internal.verbs;

/** A copy of one work completion, for assertions. */
record Completion(long wrId, int status, int opcode, int byteLen, boolean hasImm, int immData, int qpNum) {

    static Completion of(WorkCompletions wcs, int i) {
        boolean ok = wcs.status(i) == IbvWcStatus.SUCCESS;
        return new Completion(wcs.wrId(i), wcs.status(i), ok ? wcs.opcode(i) : -1, ok ? wcs.byteLen(i) : 0,
                ok && wcs.hasImm(i), ok && wcs.hasImm(i) ? wcs.immData(i) : 0, wcs.qpNum(i));
    }

    @Override
    public String toString() {
        return "Completion[wr_id=" + wrId + ", " + IbvWcStatus.name(status) + ", " + IbvWcOpcode.name(opcode)
                + ", byte_len=" + byteLen + (hasImm ? ", imm=0x" + Integer.toHexString(immData) : "") + "]";
    }
}
