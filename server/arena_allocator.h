// ArenaAllocator: a gRPC callback-API message allocator that places one
// call's request and response on one protobuf Arena, whose first block lives
// inside the holder. A unary call then costs one heap allocation for its
// messages (the holder) instead of one per string and sub-message of the
// request's parse and of the response's fill, and frees them all at once
// when gRPC releases the call. Set once per method
// (SetMessageAllocatorFor_X) before the server starts; must outlive the
// server. Thread-safe (stateless).
#ifndef PHALANX_SERVER_ARENA_ALLOCATOR_H_
#define PHALANX_SERVER_ARENA_ALLOCATOR_H_

#include <cstddef>

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"
#include "storage/sync/handoff.h"

namespace phalanx::server {

template <typename Request, typename Response>
class ArenaAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder();
  }

 private:
  // A SubmitGang call's request and its response (a gang with placement
  // and reason) fit in the first block; a larger one grows the arena.
  static constexpr size_t kInlineBytes = 4096;

  static google::protobuf::ArenaOptions Options(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = kInlineBytes;
    return options;
  }

  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(block_)) {
      this->set_request(
          google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(
          google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC calls this once the call is done, on one of its threads: it
    // acquires what the thread that finished the call released (rpc.cc's
    // FinishCall; storage/sync/handoff.h), the response's fill among it.
    void Release() override {
      HandoffAcquire(static_cast<grpc::RpcAllocatorState*>(this));
      delete this;
    }

   private:
    alignas(8) char block_[kInlineBytes];
    google::protobuf::Arena arena_;  // after block_: built from it
  };
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_ARENA_ALLOCATOR_H_
