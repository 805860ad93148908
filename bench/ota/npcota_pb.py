"""The gRPC update service's messages (package `npcota`), built from a descriptor at import: no protoc step,
no generated file to keep in sync. Deployed unchanged beside the host agent (it needs only `protobuf`).

    service Updates { rpc Fetch(FetchRequest) returns (stream Chunk); }
    message FetchRequest { string path = 1; uint64 offset = 2; }      // models/NAME/FORMAT/VERSION[/...]
    message Chunk { uint64 offset = 1; bytes data = 2; uint64 size = 3; string etag = 4; }
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SERVICE = "npcota.Updates"
METHOD = "/npcota.Updates/Fetch"

_T = descriptor_pb2.FieldDescriptorProto


def _build():
    fdp = descriptor_pb2.FileDescriptorProto(name="npcota.proto", package="npcota", syntax="proto3")
    req = fdp.message_type.add(name="FetchRequest")
    req.field.add(name="path", number=1, type=_T.TYPE_STRING, label=_T.LABEL_OPTIONAL)
    req.field.add(name="offset", number=2, type=_T.TYPE_UINT64, label=_T.LABEL_OPTIONAL)
    chunk = fdp.message_type.add(name="Chunk")
    chunk.field.add(name="offset", number=1, type=_T.TYPE_UINT64, label=_T.LABEL_OPTIONAL)
    chunk.field.add(name="data", number=2, type=_T.TYPE_BYTES, label=_T.LABEL_OPTIONAL)
    chunk.field.add(name="size", number=3, type=_T.TYPE_UINT64, label=_T.LABEL_OPTIONAL)
    chunk.field.add(name="etag", number=4, type=_T.TYPE_STRING, label=_T.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("npcota.FetchRequest")), get(pool.FindMessageTypeByName("npcota.Chunk"))


FetchRequest, Chunk = _build()
