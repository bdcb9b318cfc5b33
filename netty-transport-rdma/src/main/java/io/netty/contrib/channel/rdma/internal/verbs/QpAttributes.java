package io.netty.contrib.channel.rdma.internal.verbs;

/**
 * What {@code ibv_query_qp} reports of a connected RC queue pair's path and transport settings
 * ({@code struct ibv_qp_attr}).
 *
 * @param state        {@link IbvQpState}
 * @param portNum      the port the QP sends from
 * @param pathMtu      {@code enum ibv_mtu} code (1 = 256 B ... 5 = 4096 B)
 * @param sgidIndex    the source GID's index in the port's GID table ({@code ah_attr.grh.sgid_index})
 * @param trafficClass {@code ah_attr.grh.traffic_class}: on RoCE the IP header's TOS byte (DSCP and ECN)
 * @param serviceLevel {@code ah_attr.sl}
 * @param ackTimeout   local ACK timeout code: 4.096 us * 2^ackTimeout, 0 = infinite
 * @param retryCount   transport retries after an ACK timeout
 * @param rnrRetry     retries after an RNR NAK, 7 = infinite
 * @param minRnrTimer  the RNR NAK timer code this QP, as responder, asks its peer to wait
 * @param destQpNum    the peer's QP number
 */
public record QpAttributes(int state, int portNum, int pathMtu, int sgidIndex, int trafficClass, int serviceLevel,
                           int ackTimeout, int retryCount, int rnrRetry, int minRnrTimer, int destQpNum) {
    /** The bytes of an {@code enum ibv_mtu} code (256 << (code - 1)), or 0 for an unknown code. */
    public static int mtuBytes(int code) {
        return code >= 1 && code <= 5 ? 256 << (code - 1) : 0;
    }

    /** The {@code enum ibv_mtu} code of {@code bytes} (256, 512, 1024, 2048, 4096), or 0 for any other size. */
    public static int mtuEnum(int bytes) {
        for (int code = 1; code <= 5; code++) {
            if (mtuBytes(code) == bytes) {
                return code;
            }
        }
        return 0;
    }
}
