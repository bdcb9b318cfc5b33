package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.util.List;

/**
 * Every C struct and union the bindings lay out. The layout test walks these (every named member, recursively)
 * and checks each offset and size against the C compiler, so a field added to a layout is checked automatically.
 */
final class Structs {
    static final List<GroupLayout> ALL = List.of(
            IbvDevice.LAYOUT, IbvContextOps.LAYOUT, IbvContext.LAYOUT, IbvDeviceAttr.LAYOUT, IbvPortAttr.LAYOUT,
            IbvGid.LAYOUT, IbvPd.LAYOUT, IbvMr.LAYOUT, IbvMw.LAYOUT, IbvMwBindInfo.LAYOUT, IbvCompChannel.LAYOUT, IbvCq.LAYOUT, IbvSrq.LAYOUT,
            IbvSrqAttr.LAYOUT, IbvSrqInitAttr.LAYOUT, IbvQp.LAYOUT, IbvQpCap.LAYOUT, IbvQpInitAttr.LAYOUT,
            IbvGlobalRoute.LAYOUT, IbvAhAttr.LAYOUT, IbvQpAttr.LAYOUT, IbvSge.LAYOUT, IbvSendWr.LAYOUT,
            IbvRecvWr.LAYOUT, IbvWc.LAYOUT, IbvAsyncEvent.LAYOUT,
            SockaddrIn.LAYOUT, SockaddrIn6.LAYOUT, SockaddrStorage.LAYOUT,
            RdmaEventChannel.LAYOUT, RdmaCmId.LAYOUT, RdmaConnParam.LAYOUT, RdmaCmEvent.LAYOUT, RdmaAddrinfo.LAYOUT);

    private Structs() {
    }
}
