package io.netty.contrib.channel.rdma.internal.verbs;

/** The parts of {@code struct ibv_device_attr} the transport sizes its resources by. */
public record DeviceAttributes(String fwVer, long nodeGuid, int vendorId, int vendorPartId, long maxMrSize,
                               int maxQp, int maxQpWr, int maxSge, int maxCq, int maxCqe, int maxMr, int maxPd,
                               int maxQpRdAtom, int maxQpInitRdAtom, int maxSrq, int maxSrqWr, int maxSrqSge,
                               int physPortCnt) {
}
