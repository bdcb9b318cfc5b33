package io.netty.contrib.channel.rdma.internal.verbs;

/**
 * What an RC queue pair needs to move to RTR: the remote QP and how to reach it.
 *
 * @param pathMtu          {@code enum ibv_mtu} (1 = 256 ... 5 = 4096)
 * @param destQpNum        the remote QP number
 * @param rqPsn            the first packet sequence number expected from the remote side
 * @param maxDestRdAtomic  RDMA READ/atomic requests the remote side may have outstanding here
 * @param minRnrTimer      the RNR NAK timer code (IBA table 45)
 * @param portNum          the local port (from 1)
 * @param dlid             the remote LID (InfiniBand), 0 for RoCE
 * @param dgid             the remote GID (16 bytes) for a global route (RoCE), or {@code null}
 * @param sgidIndex        the local GID index used with {@code dgid}
 */
public record RtrAttributes(int pathMtu, int destQpNum, int rqPsn, int maxDestRdAtomic, int minRnrTimer,
                            int portNum, int dlid, byte[] dgid, int sgidIndex) {
    public RtrAttributes {
        if (dgid != null && dgid.length != 16) {
            throw new IllegalArgumentException("dgid: " + dgid.length + " bytes (expected: 16)");
        }
        dgid = dgid == null ? null : dgid.clone();
    }
}
