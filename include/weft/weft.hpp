// The umbrella header: everything in weft's public API.
#pragma once

#include "weft/chan.hpp"
#include "weft/net.hpp"
#include "weft/runtime.hpp"
#include "weft/select.hpp"
#include "weft/sync.hpp"
#include "weft/time.hpp"
