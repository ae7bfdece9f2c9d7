-- Converge policy files in Neovim: filetype, comments, and `policyc lsp`
-- (diagnostics, hover, go to definition, references, rename, completion,
-- outline, formatting). Needs Neovim 0.8 or later and `policyc` on $PATH
-- (or set `cmd` to its full path). Put this file in ~/.config/nvim/plugin/
-- or paste it into your init.lua. See docs/editors.md.

-- Older Neovims lack vim.fs and vim.lsp.start: say so once, clearly,
-- rather than fail on the first .policy file or do nothing.
if vim.fn.has("nvim-0.8") == 0 then
  local v = vim.version()
  vim.notify(
    string.format(
      "policy.lua (Converge): needs Neovim 0.8 or later, this is %d.%d.%d; "
        .. ".policy files get no language server (diagnostics, formatting). "
        .. "Upgrade Neovim, or see docs/editors.md for starting `policyc lsp` by hand.",
      v.major, v.minor, v.patch
    ),
    vim.log.levels.WARN
  )
  return
end

vim.filetype.add({ extension = { policy = "policy" } })

vim.api.nvim_create_autocmd("FileType", {
  pattern = "policy",
  callback = function(args)
    vim.bo[args.buf].commentstring = "// %s"
    vim.bo[args.buf].shiftwidth = 2
    vim.bo[args.buf].expandtab = true
    local marker = vim.fs.find({ ".git" }, { upward = true, path = vim.fs.dirname(args.file) })[1]
    vim.lsp.start({
      name = "policyc",
      cmd = { "policyc", "lsp" },
      root_dir = marker and vim.fs.dirname(marker) or vim.fs.dirname(args.file),
    })
  end,
})

-- Format on save with the same code as `policyc fmt`:
vim.api.nvim_create_autocmd("BufWritePre", {
  pattern = "*.policy",
  callback = function() vim.lsp.buf.format({ name = "policyc" }) end,
})
